//! The fuzz harness every target in `tests/` shares: corpus replay, then seeded, bounded,
//! shrinking generation with [proptest](mod@proptest).
//!
//! Each target is a property over the bytes an outsider controls (a broker's answer, a provider's
//! answer, a stored vault record, an S3 server's answer, a kubeconfig, an API request body or
//! selector): decoding them returns a value or an error, never a panic, and whatever else the
//! target checks. [`fuzz`]
//!
//! 1. replays every file of the target's corpus, `corpus/<target>/` in this crate: real inputs
//!    captured from the real peer (each target's tests say how), and every input that once made
//!    Vigil panic (`crash-*` files, each also a named regression test);
//! 2. then runs [`cases`] generated inputs (`VIGIL_FUZZ_CASES`, 200 by default so that
//!    `cargo test --workspace` stays fast; CI's fuzz step raises it): mostly corpus files under a
//!    few byte-level mutations ([`mutated`]: bit flips, interesting integers, inserted, removed,
//!    duplicated and spliced ranges, the target's dictionary tokens), which keep most of an input's
//!    structure so that the decoder gets past its first check; some targets add generators that
//!    know the format (valid framing around random bodies, patches built from directives).
//!
//! A failing input is shrunk to a small one, written to `target/fuzz-failures/<target>/` and
//! printed with the seed that found it (`VIGIL_FUZZ_SEED` replays a run exactly); it then goes into
//! the corpus as `crash-<what>` with a regression test named after the bug.
//!
//! Why proptest (and not cargo-fuzz, bolero or a hand-written loop): cargo-fuzz needs a nightly
//! compiler and the machines here have stable 1.95 only; bolero runs on stable, but then only as a
//! random property test too, and with a larger dependency tree. proptest is the maintained stable
//! property-testing crate: seeded runs, shrinking to a minimal failing input, and strategies to
//! write structure-aware generators with. What it does not do — mutate a corpus — is the small
//! [`mutated`] strategy here; coverage guidance is what stable Rust gives up.

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

pub use proptest;

/// Generated cases per target after the corpus: `VIGIL_FUZZ_CASES`, else 200.
pub fn cases() -> u32 {
    std::env::var("VIGIL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(200)
}

/// The run's seed: `VIGIL_FUZZ_SEED`, else a fresh one (printed, so any run can be replayed).
pub fn seed() -> u64 {
    std::env::var("VIGIL_FUZZ_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            // Folded so that two targets started in the same nanosecond still differ a little.
            (nanos as u64) ^ (u64::from(std::process::id()) << 32)
        })
}

/// `corpus/<target>/` of this crate.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// One corpus file: its name and bytes.
#[derive(Debug, Clone)]
pub struct Seed {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// The files of a target's corpus, by name. A target without corpus is a mistake: panics.
pub fn corpus(target: &str) -> Vec<Seed> {
    let dir = corpus_dir(target);
    let mut seeds: Vec<Seed> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            std::fs::read(entry.path())
                .ok()
                .map(|bytes| Seed { name, bytes })
        })
        .collect();
    seeds.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(!seeds.is_empty(), "corpus {} is empty", dir.display());
    seeds
}

/// The bytes of one corpus file (for regression tests).
pub fn corpus_file(target: &str, name: &str) -> Vec<u8> {
    let path = corpus_dir(target).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Writes a corpus file (the capture tools of the targets).
pub fn save_to_corpus(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    std::fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    eprintln!("captured {target}/{name} ({} bytes)", bytes.len());
}

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Panics seen in this process so far, on any thread (a server task's panic does not reach the
/// test that caused it: the targets whose decoder runs in a server compare this before and after).
pub fn panics() -> usize {
    install_panic_counter();
    PANICS.load(Ordering::SeqCst)
}

fn install_panic_counter() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// Replays `target`'s corpus through `check`, then [`cases`] inputs drawn from `generated`;
/// panics with the file, or the shrunk input and the seed, of the first failure. `check` returns
/// `Err` for a broken property; a panic inside it is a failure too.
pub fn fuzz<S>(target: &str, generated: S, check: impl Fn(&[u8]) -> Result<(), String>)
where
    S: Strategy<Value = Vec<u8>>,
{
    install_panic_counter();
    let started = Instant::now();
    let seeds = corpus(target);
    for seed in &seeds {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&seed.bytes)));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(broken)) => panic!("{target}: corpus file {}: {broken}", seed.name),
            Err(_) => panic!("{target}: corpus file {} panicked (see above)", seed.name),
        }
    }
    let replayed = started.elapsed();

    let seed = seed();
    let cases = cases();
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        // Failures are kept as corpus files, which survive changes to the generators; proptest's
        // own persistence keeps seeds, which do not.
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&generated, |input| {
        check(&input).map_err(TestCaseError::fail)
    });
    let generated_took = started.elapsed() - replayed;
    match result {
        Ok(()) => println!(
            "fuzz {target}: {} corpus files in {:.2?}, {cases} generated cases in {:.2?} ({:.0}/s), seed {seed}, 0 failures",
            seeds.len(),
            replayed,
            generated_took,
            f64::from(cases) / generated_took.as_secs_f64().max(1e-9),
        ),
        Err(TestError::Fail(reason, input)) => {
            let saved = save_failure(target, &input);
            panic!(
                "{target}: {reason}\n  minimal input ({} bytes, saved to {}): {:?}\n  replay: VIGIL_FUZZ_SEED={seed} VIGIL_FUZZ_CASES={cases}",
                input.len(),
                saved.display(),
                String::from_utf8_lossy(&input)
            );
        }
        Err(TestError::Abort(reason)) => panic!("{target}: aborted: {reason} (seed {seed})"),
    }
}

fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    // CARGO_TARGET_DIR when set, else the workspace's target/.
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target_dir.join("fuzz-failures").join(target);
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("failure-{:016x}", fnv1a(input)));
    let _ = std::fs::write(&path, input);
    path
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Integers that often sit on a boundary of a decoder: lengths, counts, signs.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0x8000,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// One byte-level change to an input; positions wrap around its length, so that shrinking
/// toward 0 keeps every mutation meaningful.
#[derive(Debug, Clone)]
enum Mutation {
    FlipBit {
        at: usize,
        bit: u8,
    },
    SetByte {
        at: usize,
        byte: u8,
    },
    /// A big-endian integer of 1, 2, 4 or 8 bytes from [`INTERESTING`] (negated or not).
    Integer {
        at: usize,
        width: u8,
        value: usize,
        negate: bool,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Remove {
        at: usize,
        len: usize,
    },
    Duplicate {
        at: usize,
        len: usize,
    },
    Truncate {
        at: usize,
    },
    /// A range of another corpus file, inserted.
    Splice {
        at: usize,
        other: usize,
        from: usize,
        len: usize,
    },
    /// A dictionary token, inserted or written over the input.
    Token {
        at: usize,
        token: usize,
        overwrite: bool,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::SetByte { at, byte }),
        3 => (any::<usize>(), prop::sample::select(vec![1u8, 2, 4, 8]), any::<usize>(), any::<bool>())
            .prop_map(|(at, width, value, negate)| Mutation::Integer { at, width, value, negate }),
        2 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        2 => (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::Remove { at, len }),
        1 => (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        1 => (any::<usize>(), any::<usize>(), any::<usize>(), 1usize..128)
            .prop_map(|(at, other, from, len)| Mutation::Splice { at, other, from, len }),
        3 => (any::<usize>(), any::<usize>(), any::<bool>())
            .prop_map(|(at, token, overwrite)| Mutation::Token { at, token, overwrite }),
    ]
}

fn apply(input: &mut Vec<u8>, mutation: &Mutation, seeds: &[Vec<u8>], dictionary: &[&[u8]]) {
    let pos = |at: usize, len: usize| if len == 0 { 0 } else { at % len };
    let len = input.len();
    match mutation {
        Mutation::FlipBit { at, bit } => {
            if len > 0 {
                input[pos(*at, len)] ^= 1 << bit;
            }
        }
        Mutation::SetByte { at, byte } => {
            if len > 0 {
                input[pos(*at, len)] = *byte;
            }
        }
        Mutation::Integer {
            at,
            width,
            value,
            negate,
        } => {
            let mut v = INTERESTING[value % INTERESTING.len()];
            if *negate {
                v = v.wrapping_neg();
            }
            let bytes = v.to_be_bytes();
            let width = usize::from(*width);
            let start = pos(*at, len + 1);
            let end = (start + width).min(len);
            input.splice(start..end, bytes[8 - width..].iter().copied());
        }
        Mutation::Insert { at, bytes } => {
            let at = pos(*at, len + 1);
            input.splice(at..at, bytes.iter().copied());
        }
        Mutation::Remove { at, len: n } => {
            let at = pos(*at, len + 1);
            input.drain(at..(at + n).min(len));
        }
        Mutation::Duplicate { at, len: n } => {
            let at = pos(*at, len + 1);
            let copy = input[at..(at + n).min(len)].to_vec();
            input.splice(at..at, copy);
        }
        Mutation::Truncate { at } => input.truncate(pos(*at, len + 1)),
        Mutation::Splice {
            at,
            other,
            from,
            len: n,
        } => {
            let other = &seeds[other % seeds.len()];
            let from = pos(*from, other.len() + 1);
            let piece = &other[from..(from + n).min(other.len())];
            let at = pos(*at, len + 1);
            input.splice(at..at, piece.iter().copied());
        }
        Mutation::Token {
            at,
            token,
            overwrite,
        } => {
            if dictionary.is_empty() {
                return;
            }
            let token = dictionary[token % dictionary.len()];
            let start = pos(*at, len + 1);
            let end = if *overwrite {
                (start + token.len()).min(len)
            } else {
                start
            };
            input.splice(start..end, token.iter().copied());
        }
    }
}

/// A few byte-level mutations, for generators that mutate part of an input (a frame's body).
#[derive(Debug, Clone)]
pub struct Mutations(Vec<Mutation>);

impl Mutations {
    /// Applies them in turn; `seeds` are what splices draw from.
    pub fn apply(&self, input: &mut Vec<u8>, seeds: &[Vec<u8>], dictionary: &[&[u8]]) {
        for m in &self.0 {
            apply(input, m, seeds, dictionary);
        }
    }
}

/// 1 to 8 mutations.
pub fn mutations() -> impl Strategy<Value = Mutations> {
    prop::collection::vec(mutation(), 1..8).prop_map(Mutations)
}

/// Corpus files under 1 to 8 mutations (the dictionary: tokens of the format, e.g. JSON
/// punctuation and the keys the decoder looks for).
pub fn mutated(seeds: &[Seed], dictionary: &'static [&'static [u8]]) -> BoxedStrategy<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = seeds.iter().map(|s| s.bytes.clone()).collect();
    assert!(!seeds.is_empty(), "mutated: no corpus");
    (0..seeds.len(), mutations())
        .prop_map(move |(index, mutations)| {
            let mut input = seeds[index].clone();
            mutations.apply(&mut input, &seeds, dictionary);
            input
        })
        .boxed()
}

/// Arbitrary bytes, up to `max` long.
pub fn random_bytes(max: usize) -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max).boxed()
}

/// The default mix: 9 in 10 mutated corpus files, 1 in 10 random bytes.
pub fn corpus_and_random(
    target: &str,
    dictionary: &'static [&'static [u8]],
) -> BoxedStrategy<Vec<u8>> {
    let seeds = corpus(target);
    prop_oneof![
        9 => mutated(&seeds, dictionary),
        1 => random_bytes(512),
    ]
    .boxed()
}

/// Tokens of JSON that most often change a decoder's path.
pub const JSON_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"1e999",
    b"-0",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"1.5",
    b"\"\"",
    b"\\u0000",
    b"\\ud800",
    b"{}",
    b"[]",
    b"\"a\":",
    b"[[[[[[[[[[[[[[[[",
    b"{\"a\":{\"a\":",
];

/// Keys and values of Kubernetes objects, patches and their directives.
pub const KUBE_TOKENS: &[&[u8]] = &[
    b"\"apiVersion\":",
    b"\"kind\":",
    b"\"metadata\":",
    b"\"name\":",
    b"\"namespace\":",
    b"\"labels\":",
    b"\"annotations\":",
    b"\"spec\":",
    b"\"status\":",
    b"\"data\":",
    b"\"finalizers\":",
    b"\"ownerReferences\":",
    b"\"managedFields\":",
    b"\"resourceVersion\":",
    b"\"generation\":",
    b"\"uid\":",
    b"\"containers\":",
    b"\"ports\":",
    b"\"env\":",
    b"\"$patch\":",
    b"\"delete\"",
    b"\"replace\"",
    b"\"merge\"",
    b"\"$retainKeys\":",
    b"\"$setElementOrder/containers\":",
    b"\"$deleteFromPrimitiveList/finalizers\":",
    b"\"op\":",
    b"\"add\"",
    b"\"remove\"",
    b"\"move\"",
    b"\"copy\"",
    b"\"test\"",
    b"\"path\":",
    b"\"from\":",
    b"\"value\":",
    b"\"/metadata/labels/a\"",
    b"\"/spec/containers/-\"",
    b"\"/a~1b~0c\"",
    b"\"/-\"",
    b"\"\"",
    b"\"v1\"",
    b"\"ConfigMap\"",
];

/// Tokens of YAML.
pub const YAML_TOKENS: &[&[u8]] = &[
    b"\n",
    b": ",
    b"- ",
    b"  ",
    b"---\n",
    b"...\n",
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"!!binary ",
    b"!!str ",
    b"!!int ",
    b"!!float ",
    b"? ",
    b"|\n",
    b">-\n",
    b"\"",
    b"'",
    b"{",
    b"}",
    b"[",
    b"]",
    b"~",
    b"null",
    b".inf",
    b"0x",
    b"0o",
    b"%YAML 1.2\n",
    b"%TAG ! tag:\n",
    b"#",
];

/// Bytes of protobuf: tags of every wire type, long and overlong varints, lengths.
pub const PROTOBUF_TOKENS: &[&[u8]] = &[
    b"k8s\x00",
    b"\x0a",
    b"\x12",
    b"\x1a",
    b"\x22",
    b"\x08",
    b"\x10",
    b"\x0d",
    b"\x09",
    b"\x0b",
    b"\x0c",
    b"\x0f",
    b"\x80\x01",
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00",
    b"\x00",
    b"\x7f",
    b"\x0a\x02v1\x12\x09ConfigMap",
    b"\x0a\x07apps/v1\x12\x0aDeployment",
];
