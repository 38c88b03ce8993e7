//! `trace_synth`: writes a synthetic `weft replay` trace (CSV) to stdout, streaming, in
//! O(classes) memory, so traces of any length (10 M packets and more) can be made without a
//! script and piped or written to disk.
//!
//! Each `--class` is a traffic source: classifier fields, an offered rate of frame bytes
//! (the link's per-frame overhead comes on top), packet sizes, a number of flows and an
//! arrival process. Sources are merged in time order (ties: class order), so the output is
//! sorted by `arrive_ps` as replay requires. Deterministic: the same arguments and `--seed`
//! give the same bytes.
//!
//! ```text
//! cargo run --release -p weft-cli --example trace_synth -- \
//!     --class 'tag=0,dst=10.0.1.1;rate=40gbit;bytes=1500;flows=8' \
//!     --class 'tag=1,dst=10.0.2.1;rate=10gbit;bytes=64-1500;poisson' \
//!     --packets 10000000 > big.csv
//! ```
//!
//! Class options after the fields (`;`-separated): `rate=RATE` (required, e.g. `10gbit`),
//! `bytes=N` | `bytes=A-B` (uniform) | `bytes=A|B|C` (cycled) (default 1500), `flows=K`
//! (the `flow` column cycles 0..K; default 1), `start=TIME` (first arrival, e.g. `5us`),
//! `poisson` (exponential gaps with the same mean; default: constant bit rate, each gap the
//! packet's own serialization time at `rate`). Stops after `--packets` rows or at
//! `--duration`, whichever comes first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;
use weft_core::classifier::PacketMeta;
use weft_core::units::{parse_rate, parse_size, parse_time};

#[derive(Parser)]
#[command(about = "Write a synthetic weft replay trace (CSV) to stdout")]
struct Args {
    /// A source: `FIELDS;rate=RATE[;bytes=..][;flows=K][;start=TIME][;poisson]`, e.g.
    /// `tag=1,dst=10.0.2.1;rate=10gbit;bytes=1500`. Repeatable.
    #[arg(long, required = true)]
    class: Vec<String>,
    /// Stop after this many rows.
    #[arg(long)]
    packets: Option<u64>,
    /// Stop before this time (e.g. `1ms`).
    #[arg(long)]
    duration: Option<String>,
    /// Seed for random sizes and Poisson gaps.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A comment line to put first (after `# `).
    #[arg(long)]
    comment: Vec<String>,
}

enum Sizes {
    Fixed(u32),
    Uniform(u32, u32),
    Cycle(Vec<u32>),
}

struct Source {
    /// Field values by output column (empty: not set).
    values: Vec<String>,
    rate_bps: u64,
    sizes: Sizes,
    flows: u64,
    poisson: bool,
    /// Next arrival, ps × rate_bps (exact for constant bit rate).
    next_scaled: u128,
    /// Packets emitted.
    sent: u64,
    /// Size of the next packet.
    next_bytes: u32,
}

/// splitmix64: small, fast, and good enough for sizes and gaps.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

fn size(text: &str) -> Result<u32, String> {
    let b = parse_size(text, true).map_err(|e| e.to_string())?;
    u32::try_from(b).map_err(|_| format!("size `{text}` is too large"))
}

fn parse_class(spec: &str, columns: &mut Vec<String>) -> Result<Source, String> {
    let mut parts = spec.split(';');
    let fields = parts.next().unwrap_or("").trim();
    let mut values = vec![String::new(); columns.len()];
    if !fields.is_empty() {
        // Validate with the classifier's own parser, then keep the text as written.
        fields.parse::<PacketMeta>()?;
        for kv in fields.split(',') {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("`{kv}`: expected FIELD=VALUE"))?;
            let k = k.trim().to_string();
            let i = match columns.iter().position(|c| *c == k) {
                Some(i) => i,
                None => {
                    columns.push(k);
                    values.push(String::new());
                    columns.len() - 1
                }
            };
            values[i] = v.trim().to_string();
        }
    }
    let mut s = Source {
        values,
        rate_bps: 0,
        sizes: Sizes::Fixed(1500),
        flows: 1,
        poisson: false,
        next_scaled: 0,
        sent: 0,
        next_bytes: 0,
    };
    for opt in parts {
        let opt = opt.trim();
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
        match k {
            "rate" => s.rate_bps = parse_rate(v).map_err(|e| format!("rate: {e}"))?,
            "bytes" => {
                s.sizes = if let Some((a, b)) = v.split_once('-') {
                    let (a, b) = (size(a)?, size(b)?);
                    if a > b {
                        return Err(format!("bytes={v}: empty range"));
                    }
                    Sizes::Uniform(a, b)
                } else if v.contains('|') {
                    Sizes::Cycle(v.split('|').map(size).collect::<Result<_, _>>()?)
                } else {
                    Sizes::Fixed(size(v)?)
                }
            }
            "flows" => {
                s.flows = v
                    .parse()
                    .ok()
                    .filter(|&k| k > 0)
                    .ok_or_else(|| format!("flows={v}: expected a positive integer"))?
            }
            "start" => {
                let t = parse_time(v, false).map_err(|e| format!("start: {e}"))?;
                s.next_scaled = t as u128 * s.rate_bps.max(1) as u128;
            }
            "poisson" => s.poisson = true,
            _ => return Err(format!("unknown class option `{opt}`")),
        }
    }
    if s.rate_bps == 0 {
        return Err("every class needs `rate=RATE`".into());
    }
    Ok(s)
}

impl Source {
    fn draw_size(&self, rng: &mut Rng) -> u32 {
        match &self.sizes {
            Sizes::Fixed(b) => *b,
            Sizes::Uniform(a, b) => a + (rng.next() % (b - a + 1) as u64) as u32,
            Sizes::Cycle(v) => v[(self.sent % v.len() as u64) as usize],
        }
    }

    fn next_ps(&self) -> u64 {
        (self.next_scaled / self.rate_bps as u128) as u64
    }

    /// Moves to the next packet: its gap is this packet's serialization time at `rate`.
    fn advance(&mut self, rng: &mut Rng) {
        let gap = self.next_bytes as u128 * 8 * 1_000_000_000_000;
        self.next_scaled += if self.poisson {
            (gap as f64 * -rng.unit().ln()) as u128
        } else {
            gap
        };
        self.sent += 1;
        self.next_bytes = self.draw_size(rng);
    }
}

fn run(args: Args) -> Result<(), String> {
    let mut columns: Vec<String> = Vec::new();
    let mut sources = Vec::new();
    for c in &args.class {
        sources.push(parse_class(c, &mut columns).map_err(|e| format!("--class `{c}`: {e}"))?);
    }
    let until_ps = match &args.duration {
        Some(d) => parse_time(d, true).map_err(|e| format!("--duration: {e}"))?,
        None => u64::MAX,
    };
    let limit = args.packets.unwrap_or(u64::MAX);
    if args.packets.is_none() && args.duration.is_none() {
        return Err("give --packets or --duration".into());
    }
    let mut rng = Rng(args.seed);
    let mut heap = BinaryHeap::new();
    for (i, s) in sources.iter_mut().enumerate() {
        s.next_bytes = s.draw_size(&mut rng);
        heap.push(Reverse((s.next_ps(), i)));
    }
    let stdout = std::io::stdout().lock();
    let mut w = BufWriter::with_capacity(1 << 16, stdout);
    let io = |e: std::io::Error| e.to_string();
    for c in &args.comment {
        writeln!(w, "# {c}").map_err(io)?;
    }
    write!(w, "arrive_ps,bytes,flow").map_err(io)?;
    for c in &columns {
        write!(w, ",{c}").map_err(io)?;
    }
    writeln!(w).map_err(io)?;
    let mut rows = 0u64;
    while let Some(Reverse((t, i))) = heap.pop() {
        if rows >= limit || t >= until_ps {
            break;
        }
        let s = &mut sources[i];
        write!(w, "{t},{},{}", s.next_bytes, s.sent % s.flows).map_err(io)?;
        for c in 0..columns.len() {
            write!(w, ",{}", s.values.get(c).map_or("", String::as_str)).map_err(io)?;
        }
        writeln!(w).map_err(io)?;
        rows += 1;
        s.advance(&mut rng);
        heap.push(Reverse((s.next_ps(), i)));
    }
    w.flush().map_err(io)
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
