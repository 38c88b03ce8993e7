//! Typed indexes into a compiled [`Program`](super::Program): [`NodeId`] numbers
//! `Program::nodes`, [`LeafId`] numbers `Program::leaves` and [`ShaperId`] numbers
//! `Program::shapers`, so that one kind of index cannot be given where another is meant.
//! [`Children`] is a node's contiguous range of child ids.
//!
//! Invariants: an id is a plain `u32` (`#[repr(transparent)]`); it prints, and serializes,
//! as that bare number. An id is only meaningful for the program that numbered it; nothing
//! here checks it against one (the program's accessors panic on an id out of range, as
//! slice indexing does).
//!
//! Cost: none. Every conversion is a move or a widening of the integer, and the types have
//! the layout of `u32`, so engines may keep plain integers in their own arrays and convert
//! at their public boundary.

use std::fmt;
use std::iter::FusedIterator;
use std::ops::Range;

/// Defines one id type: a `u32` newtype with its constructors, accessors and formatting.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[repr(transparent)]
        #[serde(transparent)]
        pub struct $name(u32);

        impl $name {
            #[doc = concat!("The ", $what, " numbered `raw`.")]
            #[inline]
            pub const fn new(raw: u32) -> $name {
                $name(raw)
            }

            #[doc = concat!("The ", $what, " at position `index` (a position in a `Vec` of ")]
            #[doc = "the program's, as `iter().enumerate()` gives it). Positions fit in `u32`:"]
            #[doc = "a program has at most `u32::MAX` of each (its limits are `u32`)."]
            #[inline]
            pub const fn from_index(index: usize) -> $name {
                debug_assert!(index <= u32::MAX as usize, "id out of u32 range");
                $name(index as u32)
            }

            /// The number.
            #[inline]
            pub const fn get(self) -> u32 {
                self.0
            }

            /// The number as a position in the program's `Vec` (and in per-id arrays).
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            /// The bare number, as the plain integer printed before.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<$name> for u32 {
            #[inline]
            fn from(id: $name) -> u32 {
                id.0
            }
        }

        impl From<$name> for usize {
            #[inline]
            fn from(id: $name) -> usize {
                id.index()
            }
        }
    };
}

id_type!(
    /// Index of a scheduling node or leaf in `Program::nodes`. Nodes are numbered
    /// breadth-first from the root, [`NodeId::ROOT`], so a parent's id is below its
    /// children's and every node's children are one contiguous range ([`Children`]).
    NodeId,
    "node"
);

id_type!(
    /// Index of a leaf in `Program::leaves` (which maps it to the leaf's [`NodeId`]). Leaves
    /// are numbered in node order; a departure's `leaf` is one.
    LeafId,
    "leaf"
);

id_type!(
    /// Index of a shaping class (a compiled shaping node) in `Program::shapers`.
    ShaperId,
    "shaping class"
);

impl NodeId {
    /// The root: node 0.
    pub const ROOT: NodeId = NodeId(0);
}

/// A node's children: the contiguous ids `start..end` (empty for a leaf), in declaration
/// (first-match) order. It iterates as [`NodeId`]s; [`Children::indices`] gives the same
/// range as positions, for slicing per-node arrays.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Children {
    start: u32,
    end: u32,
}

impl Children {
    /// No children (a leaf's).
    pub const EMPTY: Children = Children { start: 0, end: 0 };

    /// The ids `start..end`.
    ///
    /// # Panics
    /// When `end` is below `start`.
    pub const fn new(start: NodeId, end: NodeId) -> Children {
        assert!(start.0 <= end.0, "children range ends before it starts");
        Children {
            start: start.0,
            end: end.0,
        }
    }

    /// The first child's id (the start of the range, for an empty one).
    #[inline]
    pub const fn start(&self) -> NodeId {
        NodeId(self.start)
    }

    /// One past the last child's id.
    #[inline]
    pub const fn end(&self) -> NodeId {
        NodeId(self.end)
    }

    /// The first child, if any.
    #[inline]
    pub const fn first(&self) -> Option<NodeId> {
        if self.start < self.end {
            Some(NodeId(self.start))
        } else {
            None
        }
    }

    /// The last child, if any.
    #[inline]
    pub const fn last(&self) -> Option<NodeId> {
        if self.start < self.end {
            Some(NodeId(self.end - 1))
        } else {
            None
        }
    }

    /// How many children.
    #[inline]
    pub const fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether there are none (a leaf).
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Whether `id` is one of them.
    #[inline]
    pub const fn contains(&self, id: NodeId) -> bool {
        self.start <= id.0 && id.0 < self.end
    }

    /// The children in order.
    #[inline]
    pub fn iter(&self) -> ChildIter {
        ChildIter {
            next: self.start,
            end: self.end,
        }
    }

    /// The children as positions in `Program::nodes` (or any per-node array).
    #[inline]
    pub fn indices(&self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

impl fmt::Debug for Children {
    /// As the range of ids reads: `1..4`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

impl IntoIterator for Children {
    type Item = NodeId;
    type IntoIter = ChildIter;

    #[inline]
    fn into_iter(self) -> ChildIter {
        self.iter()
    }
}

impl IntoIterator for &Children {
    type Item = NodeId;
    type IntoIter = ChildIter;

    #[inline]
    fn into_iter(self) -> ChildIter {
        self.iter()
    }
}

/// The iterator over a node's [`Children`], in id order.
#[derive(Debug, Clone)]
pub struct ChildIter {
    next: u32,
    end: u32,
}

impl Iterator for ChildIter {
    type Item = NodeId;

    #[inline]
    fn next(&mut self) -> Option<NodeId> {
        if self.next < self.end {
            let id = NodeId(self.next);
            self.next += 1;
            Some(id)
        } else {
            None
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.end - self.next) as usize;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for ChildIter {
    #[inline]
    fn next_back(&mut self) -> Option<NodeId> {
        if self.next < self.end {
            self.end -= 1;
            Some(NodeId(self.end))
        } else {
            None
        }
    }
}

impl ExactSizeIterator for ChildIter {}

impl FusedIterator for ChildIter {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_and_serialize_as_bare_numbers() {
        assert_eq!(NodeId::new(7).to_string(), "7");
        assert_eq!(format!("{:>3}", LeafId::new(7)), "  7");
        assert_eq!(serde_json::to_string(&ShaperId::new(12)).unwrap(), "12");
        assert_eq!(serde_json::from_str::<NodeId>("5").unwrap(), NodeId::new(5));
        assert_eq!(NodeId::ROOT.get(), 0);
        assert_eq!(LeafId::from_index(3).index(), 3);
        assert_eq!(u32::from(ShaperId::new(9)), 9);
    }

    #[test]
    fn children_iterate_as_their_range() {
        let c = Children::new(NodeId::new(2), NodeId::new(5));
        let ids: Vec<u32> = c.iter().map(NodeId::get).collect();
        assert_eq!(ids, [2, 3, 4]);
        assert_eq!(c.iter().next_back(), Some(NodeId::new(4)));
        assert_eq!((c.len(), c.iter().len()), (3, 3));
        assert_eq!(
            (c.first(), c.last()),
            (Some(NodeId::new(2)), Some(NodeId::new(4)))
        );
        assert!(c.contains(NodeId::new(4)) && !c.contains(NodeId::new(5)));
        assert_eq!(c.indices(), 2..5);
        assert_eq!(format!("{c:?}"), "2..5");
        assert!(Children::EMPTY.is_empty());
        assert_eq!(Children::EMPTY.first(), None);
        assert_eq!(Children::EMPTY.iter().next(), None);
    }
}
