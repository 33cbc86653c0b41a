//! Where an inline probe's hit is registered without a `funcs.jsonl` record
//! (`p<pid>/inline.bin`, docs/trace-format.md): one little-endian `u32` per entry of the
//! inline list after a 16-byte header (magic, the program's load address), 0 until the entry's
//! probe fires, then the function id its hit is recorded under, plus one. The reader makes
//! each such id's record from the list (its offset and object) and the header's base.
//!
//! The file is a shared mapping (made anonymous at plant time, replaced by the file's mapping
//! in the constructor once the process directory exists, as `lines.bin` is: lines.rs): a hit
//! stores its id with one atomic store, which a crash keeps, before the events that use the
//! id are written. So a hit costs no system call and no record of its own; without the file
//! (it could not be made) or in a forked child (the inherited mapping is the parent's file,
//! whose ids are the parent's), hits are registered with a `funcs.jsonl` record as before.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use trace_format::meta::{INLINE_BIN_FILE, INLINE_BIN_HEADER, INLINE_BIN_MAGIC};

/// The hit ids of the entries of the inline list of one process image.
pub(crate) struct HitMap {
    /// The first byte of the shared mapping ([`INLINE_BIN_FILE`]); never unmapped.
    bytes: *mut u8,
    /// Entries of the list.
    len: usize,
    /// The mapping is this process's file: ids stored there are read back.
    attached: AtomicBool,
}

// SAFETY: `bytes` points to a shared mapping that lives as long as the process; after
// `new` it is only accessed through atomic operations (and by `attach`, before any other
// thread exists).
unsafe impl Send for HitMap {}
// SAFETY: as above.
unsafe impl Sync for HitMap {}

impl HitMap {
    /// The bytes of a map of `len` entries for an object loaded at `base`.
    fn size(len: usize) -> usize {
        INLINE_BIN_HEADER + 4 * len
    }

    /// A map of `len` entries, all 0, for the object loaded at `base`, in a fresh anonymous
    /// shared mapping; `None` when it cannot be mapped.
    pub(crate) fn new(len: usize, base: u64) -> Option<HitMap> {
        if len == 0 {
            return None;
        }
        let size = HitMap::size(len);
        // SAFETY: a fresh anonymous mapping, ours; zero-filled.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let bytes = p as *mut u8;
        // SAFETY: the header's 16 bytes of the fresh mapping, written by this thread alone.
        unsafe {
            std::ptr::copy_nonoverlapping(INLINE_BIN_MAGIC.as_ptr(), bytes, 8);
            std::ptr::copy_nonoverlapping(base.to_le_bytes().as_ptr(), bytes.add(8), 8);
        }
        Some(HitMap { bytes, len, attached: AtomicBool::new(false) })
    }

    fn slot(&self, entry: u32) -> Option<&AtomicU32> {
        // SAFETY: `entry < len` slots after the header of a mapping that is never unmapped,
        // page-aligned, so each slot is aligned for a `u32`; every access after `new` is atomic.
        ((entry as usize) < self.len)
            .then(|| unsafe { AtomicU32::from_ptr(self.bytes.add(INLINE_BIN_HEADER + 4 * entry as usize) as *mut u32) })
    }

    /// Whether hits can be registered here (the file is this process's).
    pub(crate) fn usable(&self) -> bool {
        self.attached.load(Ordering::Acquire)
    }

    /// Entry `entry`'s hit is recorded under function id `id`. Async-signal-safe: one atomic
    /// store into the shared mapping.
    pub(crate) fn set(&self, entry: u32, id: u32) {
        if let Some(s) = self.slot(entry) {
            s.store(id.wrapping_add(1).to_le(), Ordering::Release);
        }
    }

    /// The id entry `entry`'s hit was recorded under, if any (tests).
    #[cfg(test)]
    pub(crate) fn get(&self, entry: u32) -> Option<u32> {
        self.slot(entry).map(|s| u32::from_le(s.load(Ordering::Acquire))).filter(|&v| v != 0).map(|v| v - 1)
    }

    /// Put `dir/inline.bin`'s shared mapping where the anonymous one is, with its bytes: from
    /// now on the file holds them, and hits are registered here. Before any other thread exists
    /// (the constructor).
    pub(crate) fn attach(&self, dir: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let size = HitMap::size(self.len);
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.join(INLINE_BIN_FILE))?;
        // SAFETY: `size` bytes of our mapping, read by this thread alone (no other thread yet).
        f.write_all(unsafe { std::slice::from_raw_parts(self.bytes, size) })?;
        // SAFETY: replaces our own mapping (same address and length) with the file's, shared;
        // no other thread runs, and no probe fires meanwhile (the program has not started).
        let p = unsafe {
            libc::mmap(
                self.bytes as *mut libc::c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        self.attached.store(true, Ordering::Release);
        Ok(())
    }

    /// In a forked child: the mapping is the parent's file; hits go to `funcs.jsonl` again.
    pub(crate) fn detach(&self) {
        self.attached.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file is the header and one slot per entry, 0 until a hit's id (plus one) is stored;
    /// the map is usable only once attached, and not after `detach` (a forked child).
    #[test]
    fn a_hit_stores_its_id_in_the_file_after_the_header() {
        let map = HitMap::new(4, 0x5555_0000_1000).expect("mapped");
        assert!(!map.usable());
        let d = tempfile::tempdir().unwrap();
        map.attach(d.path()).unwrap();
        assert!(map.usable());
        map.set(2, 7);
        map.set(0, 0);
        map.set(9, 1);
        assert_eq!((map.get(0), map.get(1), map.get(2), map.get(9)), (Some(0), None, Some(7), None));
        let bytes = std::fs::read(d.path().join(INLINE_BIN_FILE)).unwrap();
        assert_eq!(bytes.len(), INLINE_BIN_HEADER + 16);
        assert_eq!(&bytes[..8], &INLINE_BIN_MAGIC);
        assert_eq!(bytes[8..16], 0x5555_0000_1000u64.to_le_bytes());
        assert_eq!(&bytes[16..], &[1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0]);
        map.detach();
        assert!(!map.usable());
    }
}
