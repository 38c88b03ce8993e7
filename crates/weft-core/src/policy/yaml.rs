//! A policy file's YAML, read from `saphyr-parser`'s event stream one piece at a time.
//!
//! [`Reader::finish`] builds one value (a scalar, or a whole list or mapping) as a small tree of
//! [`Node`]s; `parse` asks for the top-level mapping's entries one by one and for the items of
//! `nodes:` one by one, turning each item into a declaration before reading the next. So
//! reading a policy holds one node's YAML at a time, not the whole file's (`saphyr`'s
//! `MarkedYaml` tree, a linked hash map per mapping, took about 4 KB a class of a `senic`
//! node, more than the declarations: `tests/policy_memory.rs`).
//!
//! Every scalar keeps the text it was written with (after its tag and anchor), its style
//! (plain or quoted) and its tag, beside the value the YAML 1.2 core schema gives it (the
//! same resolution as `saphyr`'s loader: [`Scalar::parse_from_cow_and_metadata`]). The text
//! is what lets `parse` read integers beyond `i64` exactly and quote values as written.
//!
//! Written by hand because `saphyr`'s loader builds the whole document and resolves scalars
//! early, losing their text. Kept from that loader: an alias is a copy of its anchor's value
//! (at the alias's position), a duplicated key in a mapping is a syntax error, a list or
//! mapping with a tag outside the core schema is not read ([`Data::Other`]). Added: aliases
//! may not expand a file beyond [`MAX_EXPANSION`] nodes (a "billion laughs" file would take
//! all memory).
//!
//! Invariants: a [`Node`]'s `start..end` are character indices into the file (what the
//! parser reports), `start <= end`. Building is iterative (no recursion however deep the
//! nesting; the parser refuses nesting beyond a few hundred levels anyway, which also bounds
//! the recursion of dropping a tree). Cost: linear in the file's size plus the aliases' copies.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use saphyr::Scalar;
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, StrInput, Tag};

/// Nodes that aliases may add to a file, beyond those it writes out.
pub(super) const MAX_EXPANSION: usize = 1_000_000;

/// One YAML value and where it was written.
#[derive(Debug, Clone)]
pub(super) struct Node<'i> {
    pub data: Data<'i>,
    /// Character index of the first character.
    pub start: usize,
    /// Character index just past the value (a scalar's end may equal its start; see
    /// `parse::Parser::span`).
    pub end: usize,
}

/// The core schema's scalar tags, the only ones a policy may use (`!!str`, ...).
pub(super) const CORE_TAGS: [&str; 5] = ["str", "int", "float", "bool", "null"];

/// Whether `t` is one of [`CORE_TAGS`].
pub(super) fn is_core_tag(t: &Tag) -> bool {
    t.is_yaml_core_schema() && CORE_TAGS.contains(&t.suffix.as_str())
}

/// `t` as written in a file: `!!int` for the core schema's, else handle and suffix.
pub(super) fn tag_text(t: &Tag) -> String {
    if t.is_yaml_core_schema() {
        format!("!!{}", t.suffix)
    } else {
        format!("{}{}", t.handle, t.suffix)
    }
}

/// What a [`Node`] holds.
#[derive(Debug, Clone)]
pub(super) enum Data<'i> {
    /// A scalar: its core-schema value (`None` when a core tag such as `!!int` does not fit
    /// the text) and how it was written.
    Value(Option<Scalar<'i>>, Box<Written<'i>>),
    Sequence(Vec<Node<'i>>),
    /// Entries in the order written; keys are unique.
    Mapping(Vec<(Node<'i>, Node<'i>)>),
    /// A list or mapping with a tag outside the core schema.
    Other,
}

/// A scalar as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Written<'i> {
    /// The value's text, without quotes, tag or anchor.
    pub text: Cow<'i, str>,
    /// Neither single- nor double-quoted, nor a block scalar.
    pub plain: bool,
    /// Its tag (`!!int` is `tag:yaml.org,2002:` + `int`), if any.
    pub tag: Option<Cow<'i, Tag>>,
}

impl<'i> Node<'i> {
    /// The scalar's core-schema value, if it is a scalar that has one.
    pub(super) fn scalar(&self) -> Option<&Scalar<'i>> {
        match &self.data {
            Data::Value(v, _) => v.as_ref(),
            _ => None,
        }
    }

    /// How the scalar was written, if it is one.
    pub(super) fn written(&self) -> Option<&Written<'i>> {
        match &self.data {
            Data::Value(_, w) => Some(w),
            _ => None,
        }
    }

    /// Nodes in this tree (itself included).
    fn count(&self) -> usize {
        match &self.data {
            Data::Sequence(items) => 1 + items.iter().map(Node::count).sum::<usize>(),
            Data::Mapping(es) => 1 + es.iter().map(|(k, v)| k.count() + v.count()).sum::<usize>(),
            _ => 1,
        }
    }
}

/// An error while reading: the parser's, or one of this reader's rules, at a character index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReadError {
    /// Character index.
    pub at: usize,
    pub message: String,
}

impl From<ScanError> for ReadError {
    fn from(e: ScanError) -> ReadError {
        ReadError {
            at: e.marker().index(),
            message: e.info().to_string(),
        }
    }
}

/// The start of a value: what [`Reader::next`] gives at a value's first event.
pub(super) enum Start<'i> {
    /// A list starts; its items follow (read them with [`Reader::next`] until
    /// [`Start::End`]), or read it whole with [`Reader::finish`].
    Sequence(Event<'i>, usize),
    /// A mapping starts; keys and values alternate until [`Start::End`].
    Mapping(Event<'i>, usize),
    /// The end of the list or mapping being read (character index of its end).
    End(usize),
    /// Any other value, or an event that is not one (see [`Reader::finish`]).
    Other(Event<'i>, usize, usize),
}

/// Reads values from a YAML text (see the module doc).
pub(super) struct Reader<'i> {
    parser: Parser<'i, StrInput<'i>>,
    /// Anchored values by anchor id, and their sizes in nodes.
    anchors: HashMap<usize, (Node<'i>, usize)>,
    /// Nodes added by aliases so far.
    expanded: usize,
}

/// A list or mapping being built.
struct Open<'i> {
    node: Node<'i>,
    anchor: usize,
    /// A core tag on the container is fine; another makes it [`Data::Other`].
    foreign_tag: bool,
    /// A mapping's pending key.
    key: Option<Node<'i>>,
    /// A mapping's keys so far.
    keys: Keys,
}

/// The keys of one mapping, to refuse one given twice: scalars of the same text and value
/// (type). A linear scan while the mapping is small, a hash set beyond [`Keys::SCAN`] keys (a
/// mapping of 100,000 keys would otherwise take 10^10 comparisons).
#[derive(Default)]
pub(super) struct Keys {
    /// Keys while there are at most [`Keys::SCAN`]: (text, value type).
    few: Vec<(String, u8)>,
    /// All keys once there are more.
    many: HashSet<(String, u8)>,
}

impl Keys {
    const SCAN: usize = 16;

    /// Adds `key`; false if the mapping already has it (keys that are not scalars are never
    /// compared).
    pub(super) fn insert(&mut self, key: &Node) -> bool {
        let (Some(w), Data::Value(value, _)) = (key.written(), &key.data) else {
            return true;
        };
        let kind = match value {
            None => 0,
            Some(Scalar::Null) => 1,
            Some(Scalar::Boolean(_)) => 2,
            Some(Scalar::Integer(_)) => 3,
            Some(Scalar::FloatingPoint(_)) => 4,
            Some(Scalar::String(_)) => 5,
        };
        let id = (w.text.to_string(), kind);
        if self.many.is_empty() {
            if self.few.contains(&id) {
                return false;
            }
            self.few.push(id);
            if self.few.len() > Self::SCAN {
                self.many.extend(self.few.drain(..));
            }
            true
        } else {
            self.many.insert(id)
        }
    }
}

impl<'i> Reader<'i> {
    pub(super) fn new(text: &'i str) -> Reader<'i> {
        Reader {
            parser: Parser::new_from_str(text),
            anchors: HashMap::new(),
            expanded: 0,
        }
    }

    /// The next event with its start and end character indices; the end of the stream
    /// repeats [`Event::StreamEnd`].
    pub(super) fn event(&mut self) -> Result<(Event<'i>, usize, usize), ReadError> {
        match self.parser.next_event() {
            None => Ok((Event::StreamEnd, 0, 0)),
            Some(Err(e)) => Err(e.into()),
            Some(Ok((ev, span))) => Ok((ev, span.start.index(), span.end.index())),
        }
    }

    /// The next event, classified as the start of a value or the end of a container.
    pub(super) fn next(&mut self) -> Result<Start<'i>, ReadError> {
        let (ev, start, end) = self.event()?;
        Ok(match ev {
            Event::SequenceStart(..) => Start::Sequence(ev, start),
            Event::MappingStart(..) => Start::Mapping(ev, start),
            Event::SequenceEnd | Event::MappingEnd => Start::End(start),
            ev => Start::Other(ev, start, end),
        })
    }

    /// Reads the value that `first` starts, whole.
    pub(super) fn finish(&mut self, first: Start<'i>) -> Result<Node<'i>, ReadError> {
        let (mut ev, mut start, mut end) = match first {
            Start::Sequence(ev, at) | Start::Mapping(ev, at) => (ev, at, at),
            Start::Other(ev, s, e) => (ev, s, e),
            Start::End(at) => return Err(unexpected(at)),
        };
        let mut stack: Vec<Open<'i>> = Vec::new();
        loop {
            let is_sequence = matches!(ev, Event::SequenceStart(..));
            let done = match ev {
                Event::Scalar(text, style, anchor, tag) => {
                    // A tag outside the core schema (`!!python/object:...`, `!custom`) gives
                    // the scalar no value: it is refused where a value is read, not read as
                    // if the tag were not there.
                    let value = match &tag {
                        Some(t) if !is_core_tag(t) => None,
                        _ => Scalar::parse_from_cow_and_metadata(text.clone(), style, tag.as_ref()),
                    };
                    let node = Node {
                        data: Data::Value(
                            value,
                            Box::new(Written {
                                text,
                                plain: style == ScalarStyle::Plain,
                                tag,
                            }),
                        ),
                        start,
                        end: end.max(start),
                    };
                    self.anchor(anchor, &node);
                    node
                }
                Event::Alias(id) => {
                    let Some((node, size)) = self.anchors.get(&id) else {
                        return Err(ReadError {
                            at: start,
                            message: "an alias to an unknown anchor".into(),
                        });
                    };
                    self.expanded += size;
                    if self.expanded > MAX_EXPANSION {
                        return Err(ReadError {
                            at: start,
                            message: format!(
                                "aliases expand this file by more than {MAX_EXPANSION} values"
                            ),
                        });
                    }
                    Node {
                        start,
                        end: end.max(start),
                        ..node.clone()
                    }
                }
                Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag) => {
                    let data = if is_sequence {
                        Data::Sequence(Vec::new())
                    } else {
                        Data::Mapping(Vec::new())
                    };
                    stack.push(Open {
                        node: Node {
                            data,
                            start,
                            end: start,
                        },
                        anchor,
                        foreign_tag: tag.is_some_and(|t| !t.is_yaml_core_schema()),
                        key: None,
                        keys: Keys::default(),
                    });
                    (ev, start, end) = self.event()?;
                    continue;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let Some(mut open) = stack.pop() else {
                        return Err(unexpected(start));
                    };
                    open.node.end = start.max(open.node.start);
                    if open.foreign_tag {
                        open.node.data = Data::Other;
                    }
                    self.anchor(open.anchor, &open.node);
                    open.node
                }
                _ => return Err(unexpected(start)),
            };
            let Some(parent) = stack.last_mut() else {
                return Ok(done);
            };
            match &mut parent.node.data {
                Data::Sequence(items) => items.push(done),
                Data::Mapping(entries) => match parent.key.take() {
                    None => {
                        if !parent.keys.insert(&done) {
                            return Err(twice(&done));
                        }
                        parent.key = Some(done);
                    }
                    Some(key) => entries.push((key, done)),
                },
                _ => unreachable!("only lists and mappings are open"),
            }
            (ev, start, end) = self.event()?;
        }
    }

    /// Keeps a copy of an anchored value for its aliases.
    fn anchor(&mut self, anchor: usize, node: &Node<'i>) {
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), node.count()));
        }
    }
}

/// A duplicated key's error.
fn twice(key: &Node) -> ReadError {
    ReadError {
        at: key.start,
        message: format!(
            "the key `{}` is given twice in one mapping",
            key.written().map_or("?", |w| w.text.as_ref())
        ),
    }
}

fn unexpected(at: usize) -> ReadError {
    ReadError {
        at,
        message: "unexpected structure (the YAML parser gave an event out of place)".into(),
    }
}

impl<'i> Reader<'i> {
    /// Within a mapping read one entry at a time: its next key, whole, or `Err(at)` at its
    /// end (character index). `seen` holds the keys read before; a key equal to one of them
    /// is an error.
    pub(super) fn key(&mut self, seen: &mut Keys) -> Result<Result<Node<'i>, usize>, ReadError> {
        match self.next()? {
            Start::End(at) => Ok(Err(at)),
            s => {
                let key = self.finish(s)?;
                if !seen.insert(&key) {
                    return Err(twice(&key));
                }
                Ok(Ok(key))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Node<'_>, ReadError> {
        let mut r = Reader::new(text);
        loop {
            match r.event()? {
                (Event::DocumentStart(_), _, _) => break,
                (Event::StreamEnd, _, _) => panic!("no document"),
                _ => {}
            }
        }
        let s = r.next()?;
        r.finish(s)
    }

    fn text<'a>(n: &'a Node) -> &'a str {
        &n.written().expect("a scalar").text
    }

    #[test]
    fn scalars_keep_their_text_and_value() {
        let n = read("a: 18446744073709551615\nb: '7'\nc: !!int 0x10\nd: 1.5e3\ne: ~\n").unwrap();
        let Data::Mapping(es) = &n.data else {
            panic!("{n:?}")
        };
        let v: Vec<(&str, &str, bool, Option<Scalar>)> = es
            .iter()
            .map(|(k, v)| {
                (
                    text(k),
                    text(v),
                    v.written().unwrap().plain,
                    v.scalar().cloned(),
                )
            })
            .collect();
        assert_eq!(v[0].1, "18446744073709551615");
        assert!(
            matches!(v[0].3, Some(Scalar::FloatingPoint(_))),
            "saphyr's resolution: {v:?}"
        );
        assert_eq!((v[1].1, v[1].2), ("7", false));
        assert!(matches!(v[1].3, Some(Scalar::String(_))));
        assert_eq!(v[2].1, "0x10");
        let tag = es[2].1.written().unwrap().tag.clone().unwrap();
        assert!(tag.is_yaml_core_schema() && tag.suffix == "int", "{tag:?}");
        assert_eq!(v[3].1, "1.5e3");
        assert!(matches!(v[4].3, Some(Scalar::Null)));
    }

    #[test]
    fn an_alias_is_a_copy_at_its_own_place() {
        let src = "a: &x [1, 2]\nb: *x\n";
        let n = read(src).unwrap();
        let Data::Mapping(es) = &n.data else { panic!() };
        let Data::Sequence(items) = &es[1].1.data else {
            panic!("{:?}", es[1].1)
        };
        assert_eq!(items.len(), 2);
        assert_eq!(es[1].1.start, src.find('*').unwrap());
    }

    #[test]
    fn duplicate_keys_and_alias_bombs_are_refused() {
        let e = read("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert!(e.message.contains("`a` is given twice"), "{e:?}");
        assert_eq!(e.at, 10);
        // Each level doubles the one before: 2^25 values from a few hundred bytes.
        let mut bomb = String::from("l0: &l0 [x, x]\n");
        for i in 1..25 {
            bomb.push_str(&format!("l{i}: &l{i} [*l{}, *l{}]\n", i - 1, i - 1));
        }
        let e = read(&bomb).unwrap_err();
        assert!(e.message.contains("aliases expand"), "{e:?}");
    }

    #[test]
    fn a_key_given_twice_is_found_in_a_large_mapping() {
        let mut big: String = (0..100_000).map(|i| format!("k{i}: {i}\n")).collect();
        assert!(read(&big).is_ok());
        big.push_str("k77: again\n");
        let e = read(&big).unwrap_err();
        assert!(e.message.contains("`k77` is given twice"), "{e:?}");
        // The same text as another type is another key.
        assert!(read("1: a\n'1': b\n").is_ok());
        assert!(read("a: 1\n'a': 2\n").is_err());
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(matches!(read(&ok).unwrap().data, Data::Sequence(_)));
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = read(&deep).unwrap_err();
        assert!(e.message.contains("recursion limit"), "{e:?}");
    }
}
