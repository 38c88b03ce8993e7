//! The YAML walk: the document read one top-level entry at a time and `nodes:` one node at a
//! time (so the YAML of one node is held at a time), each mapping's keys checked against
//! the format's, each value read into its declaration with its span.
//!
//! Invariants: one YAML document per file; a declaration is produced only for a node whose
//! mapping and name could be read (any other problem is a diagnostic, and the walk goes on to
//! report the rest); unknown keys are reported with a did-you-mean hint.
//!
//! Cost: linear in the file size.

use saphyr::Scalar;
use saphyr_parser::Event;

use super::ast::{
    Document, FlowKey, FlowSched, Kind, LimitsDecl, LinkDecl, NodeDecl, QueueLimit, Spanned,
    FLOWS_KEYS, FORMAT_VERSION, LIMIT_KEYS, LINK_KEYS, MAX_WEIGHT, NODE_KEYS, QLIMIT_KEYS,
    TOP_KEYS,
};
use super::names::{excerpt, name_problem, suggest};
use super::Parser;
use crate::classifier::{proto_number, Field, Match, Prefix, FIELDS};
use crate::policy::error::{Diagnostic, Rule, Span};
use crate::policy::yaml::{Data, Keys, Node, ReadError, Reader, Start};

impl<'a> Parser<'a> {
    /// Entries of a mapping with their key names; reports unknown keys against `known`.
    fn mapping<'n, 'i>(
        &mut self,
        n: &'n Node<'i>,
        what: &str,
        known: &[&str],
    ) -> Option<Vec<(std::borrow::Cow<'n, str>, Span, &'n Node<'i>)>> {
        let Data::Mapping(map) = &n.data else {
            let span = self.span(n);
            self.err(
                Rule::BadValue,
                span,
                format!("{what} must be a mapping, found {}", Self::describe(n)),
            );
            return None;
        };
        let mut out = Vec::new();
        for (k, v) in map.iter() {
            if let Some((key, kspan)) = self.key(k, what, known) {
                out.push((key, kspan, v));
            }
        }
        Some(out)
    }

    /// A mapping's key and its span, if it is a word in `known`; else reports it.
    fn key<'n>(
        &mut self,
        k: &'n Node,
        what: &str,
        known: &[&str],
    ) -> Option<(std::borrow::Cow<'n, str>, Span)> {
        let kspan = self.span(k);
        let key: std::borrow::Cow<'n, str> = match (k.scalar(), k.written()) {
            (Some(Scalar::String(s)), _) => std::borrow::Cow::Borrowed(s.as_ref()),
            (Some(Scalar::Integer(_)), Some(w)) => std::borrow::Cow::Borrowed(w.text.as_ref()),
            _ => {
                self.err(Rule::BadValue, kspan, format!("{what}: keys must be words"));
                return None;
            }
        };
        if !known.contains(&key.as_ref()) {
            let mut d = Diagnostic::new(
                Rule::UnknownKey,
                kspan,
                format!("unknown key `{key}` in {what}"),
            );
            d = match suggest(&key, known) {
                // YAML 1.1's merge key: not part of YAML 1.2, whose reader takes it as a key.
                _ if key == "<<" => d.help(
                    "YAML merge keys (`<<: *anchor`) are not supported (YAML 1.2 has none): \
                     write the keys out; an alias may stand for a whole value (`match: *web`)",
                ),
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help(format!("known keys: {}", known.join(", "))),
            };
            self.diags.push(d);
            return None;
        }
        Some((key, kspan))
    }

    /// The stream: one document, whose value starts at the stream's first value.
    pub(super) fn stream(&mut self, r: &mut Reader<'a>) -> Result<Option<Document>, ReadError> {
        let mut doc = None;
        let mut documents = 0;
        loop {
            match r.event()? {
                (Event::DocumentStart(_), ..) => {
                    documents += 1;
                    let first = r.next()?;
                    if documents == 1 {
                        doc = self.document(r, first)?;
                    } else {
                        let second = r.finish(first)?;
                        if documents == 2 {
                            let span = self.span(&second);
                            self.err(
                                Rule::YamlSyntax,
                                span,
                                "a policy file holds one YAML document; found a second one",
                            );
                        }
                    }
                }
                (Event::StreamEnd, ..) => break,
                // The stream's start, a document's end.
                _ => {}
            }
        }
        if documents == 0 {
            let span = Span {
                file: self.file,
                offset: 0,
                len: 0,
            };
            self.err(
                Rule::MissingKey,
                span,
                "the file is empty: a policy needs `weft: 1` and `nodes:`",
            );
        }
        Ok(doc)
    }

    /// The document whose value `first` starts: a mapping read one entry at a time, and
    /// `nodes:` one node at a time (see the module doc).
    fn document(
        &mut self,
        r: &mut Reader<'a>,
        first: Start<'a>,
    ) -> Result<Option<Document>, ReadError> {
        let Start::Mapping(_, start) = first else {
            // Not a mapping: read whole, for the message.
            let root = r.finish(first)?;
            if matches!(root.data, Data::Value(Some(Scalar::Null), _)) {
                let span = self.span(&root);
                self.err(
                    Rule::MissingKey,
                    span,
                    "the file is empty: a policy needs `weft: 1` and `nodes:`",
                );
            } else {
                self.mapping(&root, "the policy", TOP_KEYS);
            }
            return Ok(None);
        };
        let mut doc = Document {
            file: self.file,
            name: None,
            link: None,
            limits: None,
            nodes: Vec::new(),
            span: self.span_of(start, start),
            nodes_span: None,
        };
        let mut version_seen = false;
        let mut nodes_seen = false;
        // A simulator scenario (it has `tenants:`) given where a policy goes: say so once.
        let mut scenario = false;
        let mut keys = Keys::default();
        let end = loop {
            let k = match r.key(&mut keys)? {
                Ok(k) => k,
                Err(end) => break end,
            };
            scenario |= matches!(k.scalar(), Some(Scalar::String(s)) if s.as_ref() == "tenants");
            let known = self
                .key(&k, "the policy", TOP_KEYS)
                .map(|(k, s)| (k.into_owned(), s));
            let value = r.next()?;
            let Some((key, kspan)) = known else {
                r.finish(value)?;
                continue;
            };
            if key == "nodes" {
                nodes_seen = true;
                doc.nodes_span = Some(kspan);
                if let Start::Sequence(..) = value {
                    loop {
                        match r.next()? {
                            Start::End(_) => break,
                            item => {
                                let item = r.finish(item)?;
                                if let Some(n) = self.node(&item) {
                                    doc.nodes.push(n);
                                }
                            }
                        }
                    }
                } else {
                    let v = r.finish(value)?;
                    self.err(
                        Rule::BadValue,
                        kspan,
                        format!(
                            "`nodes` must be a list of nodes, found {}",
                            Self::describe(&v)
                        ),
                    );
                }
                continue;
            }
            let v = r.finish(value)?;
            match key.as_str() {
                "weft" => {
                    version_seen = true;
                    if !matches!(v.scalar(), Some(Scalar::Integer(FORMAT_VERSION))) {
                        let vspan = self.span(&v);
                        self.err(
                            Rule::Version,
                            vspan,
                            format!("this weft reads policy format version {FORMAT_VERSION}; write `weft: {FORMAT_VERSION}`"),
                        );
                    }
                }
                "name" => doc.name = self.string(&v, "`name`"),
                "description" => {}
                "link" => doc.link = self.link(&v),
                "limits" => doc.limits = self.limits(&v),
                _ => unreachable!("key() filters unknown keys"),
            }
        };
        doc.span = self.span_of(start, end);
        let span = doc.span;
        if !version_seen {
            let at = self.sources.first_char(span);
            self.diags.push(
                Diagnostic::new(
                    Rule::Version,
                    at,
                    "missing `weft: 1` (the policy format version)",
                )
                .help(if scenario {
                    "this file looks like a simulator scenario (it has `tenants:`): run it with \
                     `weft sim FILE`; a policy starts with `weft: 1`"
                } else {
                    "start the file with `weft: 1`"
                }),
            );
        }
        if !nodes_seen {
            let at = self.sources.first_char(span);
            self.err(
                Rule::MissingKey,
                at,
                "missing `nodes:` (the list of scheduling, shaping and leaf nodes)",
            );
        }
        Ok(Some(doc))
    }

    fn link(&mut self, n: &Node) -> Option<LinkDecl> {
        let entries = self.mapping(n, "`link`", LINK_KEYS)?;
        let mut l = LinkDecl {
            span: self.span(n),
            ..LinkDecl::default()
        };
        for (key, _, v) in entries {
            match key.as_ref() {
                "rate" => l.rate = self.rate(v, "rate"),
                "overhead" => l.overhead = self.size(v, "overhead", false),
                "mtu" => l.mtu = self.size(v, "mtu", true),
                "count" => {
                    if let Some(s) = self.string(v, "`link.count`") {
                        match s.value.as_str() {
                            "wire" => l.count_overhead = Some(Spanned::new(true, s.span)),
                            "frame" => l.count_overhead = Some(Spanned::new(false, s.span)),
                            _ => self.diags.push(
                                Diagnostic::new(
                                    Rule::BadValue,
                                    s.span,
                                    format!("unknown byte count `{}`", s.value),
                                )
                                .help("`count: wire` counts each frame with the link's overhead at shaping classes and fair shares (the default); `count: frame` counts frame bytes only"),
                            ),
                        }
                    }
                }
                _ => unreachable!(),
            }
        }
        Some(l)
    }

    fn limits(&mut self, n: &Node) -> Option<LimitsDecl> {
        let entries = self.mapping(n, "`limits`", LIMIT_KEYS)?;
        let mut l = LimitsDecl {
            span: self.span(n),
            ..LimitsDecl::default()
        };
        for (key, _, v) in entries {
            let val = self.int(v, &key, 1, u32::MAX as u64, Rule::BadValue);
            match key.as_ref() {
                "max_depth" => l.max_depth = val,
                "max_nodes" => l.max_nodes = val,
                "max_shaping_depth" => l.max_shaping_depth = val,
                "max_match_shapes" => l.max_match_shapes = val,
                _ => unreachable!(),
            }
        }
        Some(l)
    }

    fn node(&mut self, n: &Node) -> Option<NodeDecl> {
        let span = self.span(n);
        let entries = self.mapping(n, "a node", NODE_KEYS)?;
        let entries_have_name = entries.iter().any(|(k, _, _)| k == "name");
        let mut name = None;
        let mut kind = None;
        let mut kind_missing_ok = true;
        let mut d = NodeDecl {
            name: Spanned::new(String::new(), span),
            kind: Spanned::new(Kind::Leaf, span),
            parents: Vec::new(),
            matches: None,
            priority: None,
            weight: None,
            quantum: None,
            rate: None,
            burst: None,
            default_slack: None,
            default_deadline: None,
            flows_by: None,
            flows_sched: None,
            flows_quantum: None,
            flows_span: None,
            limit: None,
            flow_limit: None,
            outstanding: None,
            policy: None,
        };
        for (key, _kspan, v) in entries {
            match key.as_ref() {
                "name" => {
                    name = self.string(v, "`name`");
                    if let Some(n) = &name {
                        if let Some(problem) = name_problem(&n.value) {
                            self.err(
                                Rule::BadValue,
                                n.span,
                                format!("node name {} {problem}", excerpt(&n.value)),
                            );
                        }
                    }
                }
                "type" => {
                    if let Some(t) = self.string(v, "`type`") {
                        match Kind::ALL.iter().find(|k| k.name() == t.value) {
                            Some(k) => kind = Some(Spanned::new(*k, t.span)),
                            None => {
                                kind_missing_ok = false;
                                let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                                let mut diag = Diagnostic::new(
                                    Rule::UnknownAlgorithm,
                                    t.span,
                                    format!("unknown node type `{}`", t.value),
                                );
                                diag = match suggest(&t.value, &names) {
                                    Some(s) => diag.help(format!(
                                        "did you mean `{s}`? known types: {}",
                                        names.join(", ")
                                    )),
                                    None => diag.help(format!("known types: {}", names.join(", "))),
                                };
                                self.diags.push(diag);
                            }
                        }
                    } else {
                        kind_missing_ok = false;
                    }
                }
                "parent" => match &v.data {
                    Data::Sequence(items) => {
                        if items.is_empty() {
                            let s = self.span(v);
                            self.err(
                                Rule::BadValue,
                                s,
                                "`parent` lists no node; omit it for the root",
                            );
                        }
                        d.parents.reserve_exact(items.len());
                        for it in items {
                            if let Some(p) = self.string(it, "a parent") {
                                d.parents.push(p);
                            }
                        }
                    }
                    _ => {
                        // `vec!`: room for one (a push would make room for four).
                        if let Some(p) = self.string(v, "`parent`") {
                            d.parents = vec![p];
                        }
                    }
                },
                "match" => d.matches = self.matches(v),
                "description" => {}
                "priority" => {
                    d.priority = self.int(v, "priority", 0, u32::MAX as u64, Rule::BadValue)
                }
                "weight" => {
                    d.weight = self.int(v, "weight", 1, MAX_WEIGHT, Rule::NonPositiveWeight)
                }
                "quantum" => d.quantum = self.size(v, "quantum", true),
                "rate" => d.rate = self.rate(v, "rate"),
                "burst" => d.burst = self.size(v, "burst", true),
                "default_slack" => d.default_slack = self.time(v, "default_slack"),
                "default_deadline" => d.default_deadline = self.time(v, "default_deadline"),
                "flows" => self.flows(v, &mut d),
                "limit" => d.limit = self.queue_limit(v, "limit"),
                "flow_limit" => d.flow_limit = self.queue_limit(v, "flow_limit"),
                "outstanding" => {
                    d.outstanding = self.int(v, "outstanding", 1, u32::MAX as u64, Rule::BadValue)
                }
                "policy" => d.policy = self.string(v, "`policy`"),
                _ => unreachable!(),
            }
        }
        match name {
            Some(n) => d.name = n,
            None => {
                // A `name` given but refused has had its diagnostic.
                if !entries_have_name {
                    self.err(Rule::MissingKey, span, "a node needs a `name`");
                }
                return None;
            }
        }
        match kind {
            Some(k) => d.kind = k,
            None => {
                if kind_missing_ok {
                    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                    self.diags.push(
                        Diagnostic::new(
                            Rule::MissingKey,
                            d.name.span,
                            format!("node `{}` needs a `type`", d.name.value),
                        )
                        .node(d.name.value.clone())
                        .help(format!("known types: {}", names.join(", "))),
                    );
                }
                return None;
            }
        }
        Some(d)
    }

    /// A node's `flows:` section (the leaf's per-flow queues: `by`, `sched`, `quantum`) into
    /// `d`, with its span for the placement check.
    fn flows(&mut self, v: &Node, d: &mut NodeDecl) {
        d.flows_span = Some(self.span(v));
        if let Some(es) = self.mapping(v, "`flows`", FLOWS_KEYS) {
            for (k, _, fv) in es {
                match k.as_ref() {
                    "by" => {
                        if let Some(s) = self.string(fv, "`flows.by`") {
                            let key = match s.value.as_str() {
                                "five-tuple" | "5-tuple" => Some(FlowKey::FiveTuple),
                                "flow" => Some(FlowKey::Flow),
                                "none" => Some(FlowKey::None),
                                _ => None,
                            };
                            match key {
                                Some(k) => d.flows_by = Some(Spanned::new(k, s.span)),
                                None => self.err(
                                    Rule::BadValue,
                                    s.span,
                                    format!(
                                        "`flows.by` is `five-tuple`, `flow` or `none`, not `{}`",
                                        s.value
                                    ),
                                ),
                            }
                        }
                    }
                    "sched" => {
                        if let Some(s) = self.string(fv, "`flows.sched`") {
                            match s.value.as_str() {
                                "fifo" => {
                                    d.flows_sched = Some(Spanned::new(FlowSched::Fifo, s.span))
                                }
                                "fair" => {
                                    d.flows_sched = Some(Spanned::new(FlowSched::Fair, s.span))
                                }
                                _ => self.diags.push(
                                    Diagnostic::new(
                                        Rule::UnknownAlgorithm,
                                        s.span,
                                        format!("unknown flow scheduler `{}`", s.value),
                                    )
                                    .help("per-flow queues are scheduled `fifo` or `fair`"),
                                ),
                            }
                        }
                    }
                    "quantum" => d.flows_quantum = self.size(fv, "flows.quantum", true),
                    _ => unreachable!(),
                }
            }
        }
    }

    fn queue_limit(&mut self, n: &Node, key: &str) -> Option<Box<Spanned<QueueLimit>>> {
        let span = self.span(n);
        let es = self.mapping(n, &format!("`{key}`"), QLIMIT_KEYS)?;
        let mut q = QueueLimit::default();
        for (k, _, v) in es {
            match k.as_ref() {
                "packets" => {
                    q.packets = self.int(
                        v,
                        &format!("{key}.packets"),
                        1,
                        u32::MAX as u64,
                        Rule::BadValue,
                    )
                }
                "bytes" => q.bytes = self.size(v, &format!("{key}.bytes"), true),
                _ => unreachable!(),
            }
        }
        Some(Box::new(Spanned::new(q, span)))
    }

    fn matches(&mut self, n: &Node) -> Option<Spanned<Match>> {
        let span = self.span(n);
        if let Some(Scalar::String(s)) = n.scalar() {
            if s == "any" {
                return Some(Spanned::new(Match::any(), span));
            }
        }
        let names: Vec<&str> = FIELDS.iter().map(|f| f.name()).chain(["app"]).collect();
        let es = self.mapping(n, "`match`", &names)?;
        let mut m = Match::default();
        let mut ok = true;
        for (k, kspan, v) in es {
            let field = Field::from_name(&k).expect("filtered by mapping()");
            if m.count(field) > 0 {
                self.err(
                    Rule::DuplicateName,
                    kspan,
                    format!("`{}` is matched twice (`app` is `dport`)", field.name()),
                );
                ok = false;
                continue;
            }
            let items: Vec<&Node> = match &v.data {
                Data::Sequence(items) => items.iter().collect(),
                _ => vec![v],
            };
            if items.is_empty() {
                let s = self.span(v);
                self.err(
                    Rule::BadValue,
                    s,
                    format!("`{k}` lists no value; omit it to match any"),
                );
                ok = false;
            }
            for it in items {
                let ispan = self.span(it);
                match field {
                    Field::Src | Field::Dst => {
                        let Some(t) = self.string(it, &format!("`{k}`")) else {
                            ok = false;
                            continue;
                        };
                        match t.value.parse::<Prefix>() {
                            Ok(p) => match field {
                                Field::Src => m.src.push(p),
                                _ => m.dst.push(p),
                            },
                            Err(e) => {
                                self.err(Rule::BadValue, ispan, format!("`{k}`: {e}"));
                                ok = false;
                            }
                        }
                    }
                    Field::Proto => {
                        let text = match (it.scalar(), it.written()) {
                            (Some(Scalar::String(s)), _) => s.to_string(),
                            (_, Some(w)) => w.text.to_string(),
                            _ => String::new(),
                        };
                        match proto_number(&text) {
                            Some(p) => m.proto.push(p),
                            None => {
                                self.err(Rule::BadValue, ispan, format!("`proto`: `{text}` is not tcp, udp, icmp, icmpv6, sctp or a number 0..=255"));
                                ok = false;
                            }
                        }
                    }
                    _ => match self.int(it, field.name(), 0, field.max_value(), Rule::BadValue) {
                        Some(v) => m.push_int(field, v.value),
                        None => ok = false,
                    },
                }
            }
        }
        ok.then_some(Spanned::new(m, span))
    }
}
