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
}

impl Funcs {
    /// Intern `info` by its key: the id of the function with that key if there is one (then
    /// `info` is dropped), else a new id.
    pub fn insert(&mut self, info: FuncInfo) -> FuncId {
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
        self.infos.iter_mut()
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
