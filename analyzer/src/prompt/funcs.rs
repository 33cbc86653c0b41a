//! [`Funcs`]: the function table of a prompt's [`super::Model`], every function of every
//! trace interned once by its [`crate::symbols::Function::key`].

use super::FuncInfo;
pub use crate::symbols::FuncId;
use rustc_hash::FxHashMap as HashMap;

/// The functions of a prompt, by [`FuncId`] (in the order they were first met in the
/// pre-order walk of all trees), with the index from key to id.
#[derive(Debug, Clone, Default)]
pub struct Funcs {
    infos: Vec<FuncInfo>,
    by_key: HashMap<std::sync::Arc<str>, FuncId>,
    /// [`Funcs::ambiguous`] per id, found on first use and forgotten on any change: every
    /// tree a prompt lays out asks, and a budget's search lays out dozens.
    ambiguous: std::sync::OnceLock<Vec<bool>>,
}

impl Funcs {
    /// Intern `info` by its key: the id of the function with that key if there is one (then
    /// `info` is dropped), else a new id.
    pub fn insert(&mut self, info: FuncInfo) -> FuncId {
        self.ambiguous.take();
        if let Some(&id) = self.by_key.get(&*info.key) {
            return id;
        }
        let id = FuncId(self.infos.len() as u32);
        self.by_key.insert(info.key.clone(), id);
        self.infos.push(info);
        id
    }

    /// The id of the function with this key.
    pub fn id(&self, key: &str) -> Option<FuncId> {
        self.by_key.get(key).copied()
    }

    /// The function with this key.
    pub fn by_key(&self, key: &str) -> Option<&FuncInfo> {
        self.id(key).map(|id| &self.infos[id.index()])
    }

    pub fn get(&self, id: FuncId) -> Option<&FuncInfo> {
        self.infos.get(id.index())
    }

    pub fn get_mut(&mut self, id: FuncId) -> Option<&mut FuncInfo> {
        self.ambiguous.take();
        self.infos.get_mut(id.index())
    }

    pub fn len(&self) -> usize {
        self.infos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }

    /// The functions in id order.
    pub fn values(&self) -> std::slice::Iter<'_, FuncInfo> {
        self.infos.iter()
    }

    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, FuncInfo> {
        self.ambiguous.take();
        self.infos.iter_mut()
    }

    /// Whether another function has the same qualified name as `id` (its tree lines then
    /// always give its location).
    pub fn ambiguous(&self, id: FuncId) -> bool {
        let flags = self.ambiguous.get_or_init(|| {
            let mut first: HashMap<&str, usize> = HashMap::default();
            first.reserve(self.infos.len());
            let mut flags = vec![false; self.infos.len()];
            for (i, f) in self.infos.iter().enumerate() {
                if let Some(&j) = first.get(f.qualname.as_str()) {
                    flags[i] = true;
                    flags[j] = true;
                } else {
                    first.insert(&f.qualname, i);
                }
            }
            flags
        });
        flags.get(id.index()).copied().unwrap_or(false)
    }

    /// (id, function) in id order.
    pub fn iter(&self) -> impl Iterator<Item = (FuncId, &FuncInfo)> {
        self.infos.iter().enumerate().map(|(i, f)| (FuncId(i as u32), f))
    }
}

impl std::ops::Index<FuncId> for Funcs {
    type Output = FuncInfo;
    fn index(&self, id: FuncId) -> &FuncInfo {
        &self.infos[id.index()]
    }
}

impl std::ops::IndexMut<FuncId> for Funcs {
    fn index_mut(&mut self, id: FuncId) -> &mut FuncInfo {
        self.ambiguous.take();
        &mut self.infos[id.index()]
    }
}

impl std::ops::Index<&FuncId> for Funcs {
    type Output = FuncInfo;
    fn index(&self, id: &FuncId) -> &FuncInfo {
        &self.infos[id.index()]
    }
}

impl FromIterator<FuncInfo> for Funcs {
    fn from_iter<I: IntoIterator<Item = FuncInfo>>(iter: I) -> Funcs {
        let mut f = Funcs::default();
        for info in iter {
            f.insert(info);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pathclass::Origin;

    fn ambiguous(funcs: &Funcs) -> Vec<bool> {
        funcs.iter().map(|(id, _)| funcs.ambiguous(id)).collect()
    }

    /// A name is ambiguous when another function has it; the answer, kept between calls, follows
    /// every change to the table (an insert, a renamed function).
    #[test]
    fn an_ambiguous_name_follows_the_table() {
        let mut funcs = Funcs::default();
        funcs.insert(crate::testutil::func_info("a.py:run", "a.py", Origin::Program, "def run(): pass"));
        funcs.insert(crate::testutil::func_info("b.py:stop", "b.py", Origin::Program, "def stop(): pass"));
        let names = |f: &Funcs| f.values().map(|f| f.qualname.clone()).collect::<Vec<_>>();
        assert_eq!(ambiguous(&funcs), [false, false], "{:?}", names(&funcs));
        let mut again = crate::testutil::func_info("c.py:run", "c.py", Origin::Program, "def run(): pass");
        again.qualname = funcs[FuncId(0)].qualname.clone();
        funcs.insert(again);
        assert_eq!(ambiguous(&funcs), [true, false, true]);
        funcs[FuncId(1)].qualname = funcs[FuncId(0)].qualname.clone();
        assert_eq!(ambiguous(&funcs), [true, true, true]);
        if let Some(f) = funcs.get_mut(FuncId(0)) {
            f.qualname = "other".into();
        }
        assert_eq!(ambiguous(&funcs), [false, true, true]);
        for f in funcs.values_mut() {
            f.qualname.push('x');
        }
        funcs[FuncId(1)].qualname = "unique".into();
        assert_eq!(ambiguous(&funcs), [false, false, false]);
    }
}
