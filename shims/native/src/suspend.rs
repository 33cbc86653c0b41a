//! Frames of stacks that a thread switched away from, kept to be resumed when a call runs on
//! that stack again (docs/native-recording.md, "Other stacks").
//!
//! A coroutine (`swapcontext`, a green thread) leaves its frames live on its own stack while
//! the thread runs elsewhere. When a call on the thread's stack (or any stack with an open
//! frame) shows that the thread left a stack, the frames above that call's stack are written
//! as returns and kept here as a segment, with the frame they were nested under. When a call
//! later runs on a stack that has no open frame, the segment whose innermost live frame (CFA
//! above the call's) is closest above it, within [`RESUME_SPAN`], is taken: its live frames
//! are written again as resumes (the trace format's resume marker, as Python's generators
//! have), and the call nests under them: a generator's calls stay under the generator, however
//! often it was switched away from.
//!
//! The storage is fixed (allocated with the thread's state): the slow path may run in a
//! signal handler, where allocating is not safe. At most [`SEGMENTS`] stacks are kept (the
//! one left longest ago gives way), and the outermost [`SEGMENT_FRAMES`] frames of each.

/// Stacks kept per thread.
pub(crate) const SEGMENTS: usize = 8;
/// Frames kept per stack (the outermost ones).
pub(crate) const SEGMENT_FRAMES: usize = 32;

/// An open call: its function's address and its CFA.
pub(crate) type Frame = (u64, u64);

#[derive(Clone, Copy, Default)]
struct Segment {
    /// Frames kept (0: the slot is free).
    len: usize,
    /// The frame the segment was nested under when it was left ((0, 0): none).
    parent: Frame,
    /// When it was left (a counter), to give the oldest slot away.
    left: u64,
    frames: [Frame; SEGMENT_FRAMES],
}

/// How far above a call the innermost live frame of a segment may be for the call to resume
/// it: the next call after a switch back comes from that frame or from code it runs (unpatched
/// code in between, a library's yield), a few frames down; coroutine stacks are larger than
/// this, so a neighbour's frames are not taken for the call's.
pub(crate) const RESUME_SPAN: u64 = 64 << 10;

/// The suspended segments of one thread.
pub(crate) struct Suspended {
    segs: [Segment; SEGMENTS],
    clock: u64,
    /// The frames `take` found live, outermost first.
    taken: [Frame; SEGMENT_FRAMES],
}

impl Suspended {
    pub(crate) fn new() -> Box<Suspended> {
        Box::new(Suspended { segs: [Segment::default(); SEGMENTS], clock: 0, taken: [(0, 0); SEGMENT_FRAMES] })
    }

    /// The frames the last `take` found live (its count of them).
    pub(crate) fn taken(&self, n: usize) -> &[Frame] {
        &self.taken[..n.min(SEGMENT_FRAMES)]
    }

    /// Keep `frames` (outermost first, all on one stack), left while nested under `parent`. A
    /// segment with the same outermost frame (the same coroutine, left again) is replaced;
    /// else a free slot is taken, else the one left longest ago.
    pub(crate) fn suspend(&mut self, frames: &[Frame], parent: Frame) {
        let Some(&outer) = frames.first() else { return };
        self.clock += 1;
        let slot = match self.segs.iter().position(|s| s.len > 0 && s.frames[0] == outer) {
            Some(i) => i,
            None => match self.segs.iter().position(|s| s.len == 0) {
                Some(i) => i,
                None => (0..SEGMENTS).min_by_key(|&i| self.segs[i].left).unwrap_or(0),
            },
        };
        let s = &mut self.segs[slot];
        s.len = frames.len().min(SEGMENT_FRAMES);
        s.frames[..s.len].copy_from_slice(&frames[..s.len]);
        s.parent = parent;
        s.left = self.clock;
    }

    /// Take the segment that a call at `cfa` resumes: the one whose innermost live frame (CFA
    /// above the call's: the frames at or below it have returned) is closest above it, within
    /// [`RESUME_SPAN`]. Returns its parent and how many of its frames are live, which
    /// [`Suspended::taken`] then gives, outermost first. A segment whose frames all lie at or
    /// just below the call (its coroutine started again from the top) is dropped.
    pub(crate) fn take(&mut self, cfa: u64) -> Option<(Frame, usize)> {
        let mut best: Option<(u64, usize, usize)> = None;
        for (i, s) in self.segs.iter_mut().enumerate() {
            if s.len == 0 {
                continue;
            }
            let live = s.frames[..s.len].iter().take_while(|f| f.1 > cfa).count();
            if live == 0 {
                if cfa - s.frames[0].1 <= RESUME_SPAN {
                    s.len = 0;
                }
                continue;
            }
            let d = s.frames[live - 1].1 - cfa;
            if d <= RESUME_SPAN && best.is_none_or(|b| d < b.0) {
                best = Some((d, i, live));
            }
        }
        let (_, i, live) = best?;
        let s = &mut self.segs[i];
        self.taken[..live].copy_from_slice(&s.frames[..live]);
        s.len = 0;
        Some((s.parent, live))
    }

    /// Forget every segment (a forked child, a thread that starts again).
    pub(crate) fn clear(&mut self) {
        for s in &mut self.segs {
            s.len = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_left_is_taken_back_with_its_live_frames() {
        let mut s = Suspended::new();
        let co = 0x1000_8000u64;
        // generator (CFA co), produce (co - 0x40), left under main.
        s.suspend(&[(0xa, co), (0xb, co - 0x40)], (0x1, 0x7fff_0000));
        // The next call on that stack, where produce was: produce has returned, generator not.
        assert_eq!(s.take(co - 0x40), Some(((0x1, 0x7fff_0000), 1)));
        assert_eq!(s.taken(1), [(0xa, co)]);
        // Taken: nothing is kept for that stack any more.
        assert_eq!(s.take(co - 0x40), None);
    }

    #[test]
    fn neighbouring_stacks_are_told_apart_by_the_closest_live_frame() {
        let mut s = Suspended::new();
        // Two coroutine stacks of 256 KiB side by side: a's frames at its top, b's at its own.
        let (a, b) = (0x1004_0000u64, 0x1000_0000u64);
        s.suspend(&[(0xa, a - 0x10), (0xa1, a - 0x80)], (0x1, 0x7fff_0000));
        s.suspend(&[(0xb, b - 0x10)], (0x1, 0x7fff_0000));
        // A call just below b's frame resumes b, not a (whose frames are 256 KiB above).
        assert_eq!(s.take(b - 0x40), Some(((0x1, 0x7fff_0000), 1)));
        assert_eq!(s.taken(1), [(0xb, b - 0x10)]);
        // A fresh coroutine on a third stack below b: nothing within reach.
        assert_eq!(s.take(b - 0x4_0000 - 0x40), None);
        // a is still kept; left again with the same outermost frame, it is replaced.
        s.suspend(&[(0xa, a - 0x10)], (0x2, 0x7fff_0000));
        assert_eq!(s.take(a - 0x40), Some(((0x2, 0x7fff_0000), 1)));
        // A coroutine started again from the top of its stack drops what was kept of it.
        s.suspend(&[(0xa, a - 0x10), (0xa1, a - 0x80)], (0x1, 0x7fff_0000));
        assert_eq!(s.take(a - 0x10), None);
        assert_eq!(s.take(a - 0x100), None);
    }

    #[test]
    fn the_oldest_gives_way_and_deep_segments_keep_their_outermost_frames() {
        let mut s = Suspended::new();
        for k in 0..=SEGMENTS as u64 {
            s.suspend(&[(k, 0x2000_0000 + (k << 24))], (0, 0));
        }
        // The first stack left gave way to the last.
        assert_eq!(s.take(0x2000_0000 - 8), None);
        assert!(s.take((0x2000_0000 + ((SEGMENTS as u64) << 24)) - 8).is_some());
        s.clear();
        assert!((0..=SEGMENTS as u64).all(|k| s.take(0x2000_0000 + (k << 24) - 8).is_none()));
        let deep: Vec<Frame> = (0..SEGMENT_FRAMES as u64 + 5).map(|k| (k, 0x4000_0000 - k * 64)).collect();
        s.suspend(&deep, (0, 0));
        let innermost_kept = 0x4000_0000 - (SEGMENT_FRAMES as u64 - 1) * 64;
        assert_eq!(s.take(innermost_kept - 0x100).map(|x| x.1), Some(SEGMENT_FRAMES));
        assert_eq!(s.taken(SEGMENT_FRAMES)[SEGMENT_FRAMES - 1].0, SEGMENT_FRAMES as u64 - 1);
    }
}
