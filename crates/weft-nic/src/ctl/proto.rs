//! The control socket's messages, typed: the [`Request`] a client sends and the [`Reply`]
//! the daemon answers, one JSON object on a line each way.
//!
//! The wire form is these types' serde form: a request is internally tagged by `cmd`
//! (`{"cmd":"stats"}`, `{"cmd":"reload","policy":PATH}`, `{"cmd":"reset_timing"}`,
//! `{"cmd":"stop"}`); a reply has `ok` first, then `error` when refused, else what the
//! command answers (a stats reply is [`Stats`]'s serde form, whose first field is `ok`).
//!
//! Invariants: a request is read from JSON once, where it arrives ([`Request::from_json`]);
//! a command this daemon does not know, a missing field or one of another type is a
//! [`RequestError`] that names the command and the field, and quotes at most
//! [`QUOTED_CHARS`] characters of what the client sent. Fields a request does not use are
//! passed over, as they always were (a request cannot set who sent it, nor the server's
//! limits: the server passes those beside the request, never in it). A reply is read back
//! ([`Reply::read`]) knowing the request it answers: a field missing or of another type is
//! a [`ReplyError`] naming it, never a default.
//!
//! Cost: a request is parsed into a `serde_json::Value` first (at most the control
//! socket's 1 MiB line), then into its variant; replies are serialized straight to text.

use std::path::PathBuf;

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::stats::{ReadError, Stats};

/// The commands a [`Request`] can name, by their wire names, in the order refusals list
/// them.
pub const COMMANDS: [&str; 4] = ["stats", "reload", "reset_timing", "stop"];

/// The most characters of a client's own text (an unknown command's name, a value of the
/// wrong type) a [`RequestError`] quotes; longer text is cut and ends with `…`.
pub const QUOTED_CHARS: usize = 64;

/// One control request, as a client sends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// `{"cmd":"stats"}`: the daemon's counters ([`Reply::Stats`]).
    Stats,
    /// `{"cmd":"reload","policy":PATH}`: swap the running policy for the one at `policy`,
    /// read and compiled by the daemon (a relative path from its working directory, not the
    /// client's: `weft ctl reload` sends it absolute) ([`Reply::Reloaded`]).
    Reload {
        /// The policy file.
        policy: PathBuf,
    },
    /// `{"cmd":"reset_timing"}`: clear the loop's latency histograms ([`Reply::Done`]).
    ResetTiming,
    /// `{"cmd":"stop"}`: stop the daemon at its next control poll ([`Reply::Done`]).
    Stop,
}

/// Why a request line is not a [`Request`]; its text is the refusal's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The line is not JSON (serde's reason, with the line and column).
    #[error("bad request: {0}")]
    NotJson(String),
    /// The line is JSON but not an object.
    #[error("bad request: not a JSON object (a request is {{\"cmd\": COMMAND, ...}})")]
    NotAnObject,
    /// The object has no `cmd`, or one that is not a string.
    #[error("bad request: no \"cmd\" string (the command: one of {})", commands())]
    NoCommand,
    /// `cmd` names a command this daemon does not know (quoted at most [`QUOTED_CHARS`]).
    #[error("bad request: unknown command `{0}` (one of {list})", list = commands())]
    UnknownCommand(String),
    /// A field of a known command is missing or of another type.
    #[error("bad request: {cmd}: {}{message}", at(.field))]
    Field {
        /// The command.
        cmd: &'static str,
        /// The field, empty when `message` names it (`missing field `policy``).
        field: String,
        /// Why, as serde says it (quoted at most [`QUOTED_CHARS`] of the client's text).
        message: String,
    },
}

/// [`COMMANDS`] as a refusal lists them.
fn commands() -> String {
    COMMANDS.join(", ")
}

/// `` `field`: ``, or nothing when there is no field to name.
fn at(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("`{field}`: ")
    }
}

/// `s` cut to [`QUOTED_CHARS`] characters (with `…` when cut).
fn clip(s: &str) -> String {
    match s.char_indices().nth(QUOTED_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The fields of `{"cmd":"reload",...}`.
#[derive(Deserialize)]
struct ReloadFields {
    policy: PathBuf,
}

impl Request {
    /// The command's wire name (`cmd`).
    pub fn cmd(&self) -> &'static str {
        match self {
            Request::Stats => COMMANDS[0],
            Request::Reload { .. } => COMMANDS[1],
            Request::ResetTiming => COMMANDS[2],
            Request::Stop => COMMANDS[3],
        }
    }

    /// Reads a request from the JSON text `line` (one line, without its line feed).
    pub fn from_json(line: &[u8]) -> Result<Request, RequestError> {
        let v: Value =
            serde_json::from_slice(line).map_err(|e| RequestError::NotJson(e.to_string()))?;
        Request::from_value(v)
    }

    /// Reads a request from a JSON value: an object with a known `cmd` and that command's
    /// fields (others are passed over).
    pub fn from_value(v: Value) -> Result<Request, RequestError> {
        let Value::Object(obj) = v else {
            return Err(RequestError::NotAnObject);
        };
        let Some(Value::String(cmd)) = obj.get("cmd") else {
            return Err(RequestError::NoCommand);
        };
        match cmd.as_str() {
            "stats" => Ok(Request::Stats),
            "reload" => {
                let f: ReloadFields = fields("reload", Value::Object(obj))?;
                Ok(Request::Reload { policy: f.policy })
            }
            "reset_timing" => Ok(Request::ResetTiming),
            "stop" => Ok(Request::Stop),
            other => Err(RequestError::UnknownCommand(clip(other))),
        }
    }
}

/// The fields of command `cmd` read from `v`: an error names the field at fault.
fn fields<T: serde::de::DeserializeOwned>(cmd: &'static str, v: Value) -> Result<T, RequestError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        RequestError::Field {
            cmd,
            field: if path == "." { String::new() } else { path },
            message: clip(&e.into_inner().to_string()),
        }
    })
}

impl<'de> Deserialize<'de> for Request {
    /// As [`Request::from_value`].
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Request, D::Error> {
        Request::from_value(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// What a reload answers: the policy now running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    /// The new policy's name.
    pub policy: String,
    /// Its generation: 1, plus one per reload.
    pub generation: u64,
    /// What `weft run` would have warned of had it started with this policy (tenants no
    /// leaf takes), one line each; absent reads as none.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// One answer to a [`Request`].
///
/// On the wire: `{"ok":true,...}` with the command's fields, or `{"ok":false,"error":...}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `stats`'s answer: [`Stats`]'s serde form (its `ok` is `true`).
    Stats(Box<Stats>),
    /// `reload`'s answer: `{"ok":true,"policy":...,"generation":...,"warnings":[...]}`.
    Reloaded(Reloaded),
    /// `reset_timing`'s and `stop`'s answer: `{"ok":true}`.
    Done,
    /// Any request refused, and why: `{"ok":false,"error":...}`.
    Refused(String),
}

impl Reply {
    /// A refusal saying `error`.
    pub fn refused(error: impl Into<String>) -> Reply {
        Reply::Refused(error.into())
    }

    /// Whether the request was carried out (anything but [`Reply::Refused`]).
    pub fn is_ok(&self) -> bool {
        !matches!(self, Reply::Refused(_))
    }

    /// Why the request was refused, if it was.
    pub fn error(&self) -> Option<&str> {
        match self {
            Reply::Refused(e) => Some(e),
            _ => None,
        }
    }

    /// The reply's wire form as a JSON value (reports that keep the answer as it was).
    pub fn to_json(&self) -> Value {
        // Cannot fail: every map's keys are strings.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// Reads the answer `v` to `req`: `{"ok":false,...}` is [`Reply::Refused`] (its
    /// `error`, or `refused` without one), anything else must be `req`'s answer, read
    /// field by field.
    pub fn read(req: &Request, v: &Value) -> Result<Reply, ReplyError> {
        if v.get("ok") == Some(&Value::Bool(false)) {
            let e = v.get("error").and_then(Value::as_str).unwrap_or("refused");
            return Ok(Reply::Refused(e.to_string()));
        }
        let other = |message: String| ReplyError::Other {
            cmd: req.cmd(),
            message,
        };
        match req {
            Request::Stats => Stats::from_json(v)
                .map(|s| Reply::Stats(Box::new(s)))
                .map_err(ReplyError::Stats),
            Request::Reload { .. } => {
                ok_true(v).map_err(other)?;
                serde_path_to_error::deserialize(v)
                    .map(Reply::Reloaded)
                    .map_err(|e| {
                        let path = e.path().to_string();
                        let path = if path == "." { String::new() } else { path };
                        other(format!("{}{}", at(&path), e.into_inner()))
                    })
            }
            Request::ResetTiming | Request::Stop => {
                ok_true(v).map_err(other)?;
                Ok(Reply::Done)
            }
        }
    }
}

/// `Ok` if `v` says `"ok": true`.
fn ok_true(v: &Value) -> Result<(), String> {
    match v.get("ok") {
        Some(Value::Bool(true)) => Ok(()),
        Some(_) => Err("`ok`: neither true nor false".into()),
        None => Err("missing field `ok`".into()),
    }
}

impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Reply::Stats(stats) => stats.serialize(s),
            Reply::Reloaded(r) => {
                let mut m = s.serialize_map(Some(4))?;
                m.serialize_entry("ok", &true)?;
                m.serialize_entry("policy", &r.policy)?;
                m.serialize_entry("generation", &r.generation)?;
                m.serialize_entry("warnings", &r.warnings)?;
                m.end()
            }
            Reply::Done => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("ok", &true)?;
                m.end()
            }
            Reply::Refused(e) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("ok", &false)?;
                m.serialize_entry("error", e)?;
                m.end()
            }
        }
    }
}

/// Why an answer does not read as the reply to its request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// A stats answer that is not this weft's [`Stats`] (the field and where it is).
    #[error("the daemon's stats do not read as this weft's: {0}")]
    Stats(ReadError),
    /// Another command's answer that does not read.
    #[error("the daemon's answer to `{cmd}` does not read as this weft's: {message}")]
    Other {
        /// The command answered.
        cmd: &'static str,
        /// What is wrong, naming the field.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every request, in the exact JSON text a client sends it (`weft ctl`, the testbed,
    /// the scripts of docs/dataplane.md), reads into its variant and is sent back as the
    /// same text.
    #[test]
    fn every_request_round_trips_through_the_text_clients_send() {
        for (text, req) in [
            (r#"{"cmd":"stats"}"#, Request::Stats),
            (
                r#"{"cmd":"reload","policy":"/etc/weft/fair.yaml"}"#,
                Request::Reload {
                    policy: "/etc/weft/fair.yaml".into(),
                },
            ),
            (r#"{"cmd":"reset_timing"}"#, Request::ResetTiming),
            (r#"{"cmd":"stop"}"#, Request::Stop),
        ] {
            assert_eq!(
                Request::from_json(text.as_bytes()),
                Ok(req.clone()),
                "{text}"
            );
            assert_eq!(serde_json::to_string(&req).unwrap(), text);
            let again: Request = serde_json::from_str(text).unwrap();
            assert_eq!(again, req);
            assert!(COMMANDS.contains(&req.cmd()));
        }
        // Spaces, another order of fields and fields a request does not use read the same.
        assert_eq!(
            Request::from_json(br#"{ "policy": "/p.yaml", "cmd": "reload", "json": true }"#),
            Ok(Request::Reload {
                policy: "/p.yaml".into()
            })
        );
    }

    /// An unknown command is refused naming it and the commands there are.
    #[test]
    fn an_unknown_command_is_refused_by_name() {
        let e = Request::from_json(br#"{"cmd":"restart"}"#).unwrap_err();
        assert_eq!(e, RequestError::UnknownCommand("restart".into()));
        assert_eq!(
            e.to_string(),
            "bad request: unknown command `restart` (one of stats, reload, reset_timing, stop)"
        );
        // A client's long name is not echoed whole.
        let long = format!(r#"{{"cmd":"{}"}}"#, "x".repeat(10_000));
        let e = Request::from_json(long.as_bytes()).unwrap_err().to_string();
        assert!(e.len() < 200 && e.contains('…'), "{e}");
    }

    /// A field of the wrong type, or missing, is refused naming the command and the field.
    #[test]
    fn a_bad_field_is_refused_naming_the_command_and_the_field() {
        let e = Request::from_json(br#"{"cmd":"reload","policy":5}"#).unwrap_err();
        assert!(
            matches!(&e, RequestError::Field { cmd: "reload", field, .. } if field == "policy"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "bad request: reload: `policy`: invalid type: integer `5`, expected path string"
        );
        let e = Request::from_json(br#"{"cmd":"reload"}"#).unwrap_err();
        assert_eq!(e.to_string(), "bad request: reload: missing field `policy`");
    }

    /// What is not a request object says so.
    #[test]
    fn what_is_not_a_request_object_is_refused() {
        assert!(matches!(
            Request::from_json(b"not json"),
            Err(RequestError::NotJson(_))
        ));
        assert_eq!(Request::from_json(b"[1]"), Err(RequestError::NotAnObject));
        assert_eq!(
            Request::from_json(br#"{"cmd":7}"#),
            Err(RequestError::NoCommand)
        );
        assert_eq!(Request::from_json(b"{}"), Err(RequestError::NoCommand));
    }

    /// Each reply is written with the keys, in the order, `weft ctl` and scripts have
    /// always read, and reads back as itself.
    #[test]
    fn replies_keep_their_wire_form_and_read_back() {
        let reload = Request::Reload {
            policy: "/p.yaml".into(),
        };
        let reloaded = Reply::Reloaded(Reloaded {
            policy: "two".into(),
            generation: 2,
            warnings: vec!["w".into()],
        });
        let stats = Reply::Stats(Box::new(Stats {
            ok: true,
            policy: "p".into(),
            ..Stats::default()
        }));
        for (req, reply, text) in [
            (
                &reload,
                &reloaded,
                r#"{"ok":true,"policy":"two","generation":2,"warnings":["w"]}"#.to_string(),
            ),
            (&Request::Stop, &Reply::Done, r#"{"ok":true}"#.to_string()),
            (
                &Request::ResetTiming,
                &Reply::Done,
                r#"{"ok":true}"#.to_string(),
            ),
            (
                &Request::Stats,
                &Reply::refused("no"),
                r#"{"ok":false,"error":"no"}"#.to_string(),
            ),
            (
                &Request::Stats,
                &stats,
                serde_json::to_string(&Stats {
                    ok: true,
                    policy: "p".into(),
                    ..Stats::default()
                })
                .unwrap(),
            ),
        ] {
            assert_eq!(serde_json::to_string(reply).unwrap(), text);
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(&Reply::read(req, &v).unwrap(), reply, "{text}");
        }
        // A reload answer of an older daemon, without warnings, reads as none.
        let v = json!({"ok": true, "policy": "two", "generation": 2});
        assert!(matches!(
            Reply::read(&reload, &v),
            Ok(Reply::Reloaded(Reloaded { warnings, .. })) if warnings.is_empty()
        ));
    }

    /// An answer that does not read names the field and the command.
    #[test]
    fn an_answer_that_does_not_read_names_the_field() {
        let reload = Request::Reload {
            policy: "/p.yaml".into(),
        };
        let e = Reply::read(
            &reload,
            &json!({"ok": true, "policy": "two", "generation": "2"}),
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "the daemon's answer to `reload` does not read as this weft's: `generation`: \
                 invalid type"
            ),
            "{e}"
        );
        let e = Reply::read(&Request::Stop, &json!({})).unwrap_err();
        assert!(e.to_string().ends_with("missing field `ok`"), "{e}");
        let e = Reply::read(&Request::Stats, &json!({"ok": true})).unwrap_err();
        assert!(matches!(e, ReplyError::Stats(_)), "{e}");
        assert_eq!(
            Reply::read(&Request::Stats, &json!({"ok": false})),
            Ok(Reply::refused("refused"))
        );
    }
}
