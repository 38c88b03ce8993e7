//! A pool of entries addressed by `u32`, with a free list linked through the entries' own
//! `next` field: the storage under the fast engine's intrusive lists (a node's queues per
//! child). A list built on it
//! costs a `u32` head where a `Vec` per list would cost a buffer that has to meet its own
//! peak; the pool grows to the most entries in use at once and keeps its capacity, so it
//! does not allocate in steady state.
//!
//! Invariants: every index handed out by [`Pool::take`] and not yet given back holds a live
//! entry; the free list holds exactly the others. Cost: take and give O(1). Hand-written
//! (a free list through the entries, so an entry costs nothing beyond its own link).

/// No entry: the end of a list, in the pool's free list and in its users' lists alike.
pub(crate) const NIL: u32 = u32::MAX;

/// An entry that carries the index of the next one in its list.
pub(crate) trait Linked: Copy {
    fn next(&self) -> u32;
    fn set_next(&mut self, next: u32);
}

/// The pool (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct Pool<T> {
    items: Vec<T>,
    /// The first free entry, or `NIL`.
    free: u32,
}

impl<T> Default for Pool<T> {
    fn default() -> Pool<T> {
        Pool {
            items: Vec::new(),
            free: NIL,
        }
    }
}

impl<T: Linked> Pool<T> {
    /// Stores `t` in a free entry (or a new one); its index.
    #[inline(always)]
    pub(super) fn take(&mut self, t: T) -> u32 {
        match self.free {
            NIL => {
                self.items.push(t);
                (self.items.len() - 1) as u32
            }
            i => {
                self.free = self.items[i as usize].next();
                self.items[i as usize] = t;
                i
            }
        }
    }

    /// Returns entry `i` to the free list (its contents are dead from here on).
    #[inline(always)]
    pub(super) fn give(&mut self, i: u32) {
        self.items[i as usize].set_next(self.free);
        self.free = i;
    }

    /// Entries made so far, free or not (tests).
    #[cfg(test)]
    pub(super) fn made(&self) -> usize {
        self.items.len()
    }

    /// Entries on the free list (tests).
    #[cfg(test)]
    pub(super) fn free_entries(&self) -> usize {
        let (mut n, mut at) = (0, self.free);
        while at != NIL {
            n += 1;
            at = self.items[at as usize].next();
        }
        n
    }
}

impl<T> std::ops::Index<u32> for Pool<T> {
    type Output = T;

    #[inline(always)]
    fn index(&self, i: u32) -> &T {
        &self.items[i as usize]
    }
}

impl<T> std::ops::IndexMut<u32> for Pool<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: u32) -> &mut T {
        &mut self.items[i as usize]
    }
}
