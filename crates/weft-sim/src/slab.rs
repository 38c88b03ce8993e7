//! A slab: values kept at stable `u32` indices, a freed index reused by the next insert
//! (last freed, first reused). The simulator keeps what a weft-core engine holds by the id
//! it hands back (an engine NIC model, a policy qdisc, a receiving host's ingress queues)
//! and its open requests this way, so that nothing is allocated per packet once the slab
//! has grown to its peak.
//!
//! Invariants: an index is either in use (inserted and not removed since) or free, never
//! both; removing an index that is not in use is a bug (`debug_assert!`).
//!
//! Cost: insert and remove O(1), checks included; [`Slab::in_use`] O(capacity).

/// Values at stable indices (module doc).
#[derive(Debug, Clone)]
pub(crate) struct Slab<T> {
    items: Vec<T>,
    free: Vec<u32>,
    /// Whether each index is in use (the free list's complement, kept so that checking an
    /// index costs O(1), not a scan of the free list).
    used: Vec<bool>,
}

impl<T> Default for Slab<T> {
    fn default() -> Slab<T> {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
            used: Vec::new(),
        }
    }
}

impl<T: Copy> Slab<T> {
    /// Keeps `v` at a free index (the last freed) or a new one, and returns it.
    pub(crate) fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = v;
                self.used[i as usize] = true;
                i
            }
            None => {
                self.items.push(v);
                self.used.push(true);
                (self.items.len() - 1) as u32
            }
        }
    }

    /// Frees index `i` and returns its value.
    pub(crate) fn remove(&mut self, i: u32) -> T {
        debug_assert!(
            self.used.get(i as usize) == Some(&true),
            "slab: index {i} is not in use ({} slots, {} free)",
            self.items.len(),
            self.free.len()
        );
        self.used[i as usize] = false;
        self.free.push(i);
        self.items[i as usize]
    }

    /// The indices in use, ascending.
    pub(crate) fn in_use(&self) -> Vec<u32> {
        (0..self.used.len() as u32)
            .filter(|&i| self.used[i as usize])
            .collect()
    }
}

impl<T> std::ops::Index<u32> for Slab<T> {
    type Output = T;
    fn index(&self, i: u32) -> &T {
        &self.items[i as usize]
    }
}

impl<T> std::ops::IndexMut<u32> for Slab<T> {
    fn index_mut(&mut self, i: u32) -> &mut T {
        &mut self.items[i as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::Slab;

    /// Freed indices come back last freed first; the rest keep their values.
    #[test]
    fn freed_indices_are_reused_last_first() {
        let mut s = Slab::default();
        let (a, b, c) = (s.insert('a'), s.insert('b'), s.insert('c'));
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(s.remove(a), 'a');
        assert_eq!(s.remove(c), 'c');
        assert_eq!(s.in_use(), [1]);
        assert_eq!(s.insert('d'), 2);
        assert_eq!(s.insert('e'), 0);
        assert_eq!((s[0], s[1], s[2]), ('e', 'b', 'd'));
        assert_eq!(s.insert('f'), 3);
    }
}
