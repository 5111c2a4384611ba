//! A node's task program specialized to the input shapes it is called with (the program's v2
//! shape section evaluated by `hfx_program_specialize`, then parsed), kept per node in a small
//! LRU cache keyed by the input shapes.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::hexagon::Loaded;
use crate::hfx::Program;
use crate::schedule::Chooser;

/// Specialized programs kept per node.
pub const CAPACITY: usize = 8;

/// A specialized program, on the hexagon backend its copy loaded into the cDSP session
/// (unloaded when the entry is dropped), the share its calls run at (shares.rs) and its choice of
/// schedule on the host (schedule.rs).
pub struct Specialized {
    pub program: Program,
    pub loaded: Option<Loaded>,
    pub share_a: f32,
    pub schedule: Chooser,
}

type Shapes = Vec<Vec<i64>>;

/// Most recently used last.
#[derive(Default)]
pub struct Cache {
    entries: Mutex<Vec<(Shapes, Arc<Specialized>)>>,
}

impl Cache {
    fn lock(&self) -> MutexGuard<'_, Vec<(Shapes, Arc<Specialized>)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lookup(&self, shapes: &[Vec<i64>]) -> Option<Arc<Specialized>> {
        let mut entries = self.lock();
        let i = entries.iter().position(|(s, _)| s == shapes)?;
        let entry = entries.remove(i);
        let hit = Arc::clone(&entry.1);
        entries.push(entry);
        Some(hit)
    }

    /// The entry for `shapes`; on a miss `make` builds it (outside the lock, so other shapes are
    /// served meanwhile) and it replaces the least recently used entry when the cache is full.
    pub fn get_or_make<E>(
        &self,
        shapes: &[Vec<i64>],
        make: impl FnOnce() -> Result<Specialized, E>,
    ) -> Result<Arc<Specialized>, E> {
        if let Some(hit) = self.lookup(shapes) {
            return Ok(hit);
        }
        let made = Arc::new(make()?);
        let mut entries = self.lock();
        if let Some((_, raced)) = entries.iter().find(|(s, _)| s == shapes) {
            return Ok(Arc::clone(raced)); // another thread made it meanwhile
        }
        if entries.len() == CAPACITY {
            entries.remove(0);
        }
        entries.push((shapes.to_vec(), Arc::clone(&made)));
        Ok(made)
    }
}
