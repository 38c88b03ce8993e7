//! Looking parts of a compiled policy up by name, as a driver applying live updates does:
//! nodes (`Program::node_id`) and shaping classes (`Program::shaper_id`), in either Unicode
//! form.

use std::path::Path;

use weft_core::policy::{load, LoadOptions, ShaperId};
use weft_core::sched::{fast::FastEngine, Engine, Update};

#[test]
fn shaping_classes_are_found_by_name_for_updates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/policies/loom-fig1.yaml");
    let p = load(&path, &LoadOptions::default()).unwrap_or_else(|e| panic!("{}", e.render_plain()));
    let id = p.shaper_id("vm1-dst2").expect("a shaping class");
    assert_eq!(p.shaper(id).name, "vm1-dst2");
    assert_eq!(p.shaper_id("vm1"), None, "a node is not a shaping class");
    assert_eq!(p.shaper_id("nope"), None);
    let mut e = FastEngine::new(std::sync::Arc::new(p));
    e.update(
        Update::Shaper {
            shaper: id,
            rate_bps: 2_000_000_000,
            burst_bytes: 65_536,
        },
        0,
    )
    .unwrap();
    // Either Unicode form of a name.
    let text = "weft: 1\nnodes:\n  - {name: root, type: fifo}\n  - {name: caf\u{e9}, type: shape, parent: root, rate: 1gbit}\n  - {name: a, type: leaf, parent: caf\u{e9}}\n";
    let p = weft_core::policy::compile_str(Path::new("x.yaml"), text, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render_plain()));
    assert_eq!(p.shaper_id("cafe\u{301}"), Some(ShaperId::new(0)));
}
