//! Helpers shared by the integration tests.

use weft_core::classifier::PacketMeta;

/// A packet with the named fields set where a value is given (`set_field` syntax), the
/// others absent: what the tests' random packet generators build.
pub fn meta(fields: &[(&str, Option<String>)]) -> PacketMeta {
    let mut p = PacketMeta::default();
    for (name, value) in fields {
        if let Some(v) = value {
            p.set_field(name, v)
                .unwrap_or_else(|e| panic!("{name}={v}: {e}"));
        }
    }
    p
}
