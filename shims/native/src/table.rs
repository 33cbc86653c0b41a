//! The process-wide address -> id table: readers never lock; writers hold `COLD`. A full
//! table is replaced by a twice larger copy; the old one is leaked, since readers may still be
//! looking at it.
use crate::process::TABLE;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

pub(crate) struct Table {
    shift: u32,
    mask: usize,
    /// Occupied slots; written only under `COLD` (atomic so that no `&mut Table` is ever
    /// formed while other threads read the table).
    len: AtomicUsize,
    keys: Box<[AtomicU64]>,
    ids: Box<[AtomicU32]>,
}

impl Table {
    pub(crate) fn new(bits: u32) -> Table {
        let cap = 1usize << bits;
        Table {
            shift: 64 - bits,
            mask: cap - 1,
            len: AtomicUsize::new(0),
            keys: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            ids: (0..cap).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    #[inline(always)]
    pub(crate) fn slot(&self, addr: u64) -> usize {
        (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline(always)]
    pub(crate) fn get(&self, addr: u64) -> Option<u32> {
        let mut i = self.slot(addr);
        loop {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == addr {
                return Some(self.ids[i].load(Ordering::Relaxed));
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Insert (caller holds `COLD`, and `addr` is absent and non-zero). Through `&self`:
    /// readers may be looking at the table; they see the slot once its key is published.
    pub(crate) fn put(&self, addr: u64, id: u32) {
        let mut i = self.slot(addr);
        while self.keys[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & self.mask;
        }
        self.ids[i].store(id, Ordering::Relaxed);
        self.keys[i].store(addr, Ordering::Release);
        self.len.fetch_add(1, Ordering::Relaxed);
    }
}

#[inline(always)]
pub(crate) fn lookup(addr: u64) -> Option<u32> {
    Table::get_in(&TABLE, addr)
}

/// Insert under `COLD`, growing the table first when it is half full.
pub(crate) fn insert(addr: u64, id: u32) {
    Table::insert_in(&TABLE, addr, id)
}

impl Table {
    /// Look `addr` up in the table `at` points to (none yet: absent).
    #[inline(always)]
    pub(crate) fn get_in(at: &AtomicPtr<Table>, addr: u64) -> Option<u32> {
        let t = at.load(Ordering::Acquire);
        if t.is_null() {
            return None;
        }
        // SAFETY: tables are never freed.
        unsafe { (*t).get(addr) }
    }

    /// Insert into the table `at` points to (the caller holds that table's writer lock,
    /// and `addr` is absent and non-zero), growing it first when it is half full.
    pub(crate) fn insert_in(at: &AtomicPtr<Table>, addr: u64, id: u32) {
        let mut t = at.load(Ordering::Acquire);
        // SAFETY: tables are never freed; only the holder of `COLD` mutates one, and a table is
        // only mutated (by `put`) in slots readers see as empty until the key is published.
        unsafe {
            if t.is_null() || ((*t).len.load(Ordering::Relaxed) + 1) * 2 > (*t).mask + 1 {
                let bits = if t.is_null() { 12 } else { 64 - (*t).shift + 1 };
                let n = Table::new(bits);
                if !t.is_null() {
                    for (k, v) in (*t).keys.iter().zip((*t).ids.iter()) {
                        let k = k.load(Ordering::Relaxed);
                        if k != 0 {
                            n.put(k, v.load(Ordering::Relaxed));
                        }
                    }
                }
                t = Box::into_raw(Box::new(n));
                at.store(t, Ordering::Release);
            }
            (*t).put(addr, id);
        }
    }
}
