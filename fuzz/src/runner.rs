//! A mutation fuzzer that runs on the stable toolchain: it replays a corpus, then
//! mutates corpus entries (bit flips, byte edits, insertions, deletions, splices,
//! dictionary tokens) for a bounded number of iterations or seconds. Inputs whose
//! outcome signature is new join the working corpus (a coarse stand-in for the
//! coverage feedback cargo-fuzz gets from the compiler). Panics are caught, the
//! input is saved, and the run fails.

use crate::targets::Target;
use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bounds and seed of one fuzzing run.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Stop after this many mutated inputs.
    pub iterations: u64,
    /// Or after this long, whichever comes first.
    pub time: Duration,
    /// Seed of the mutation stream (runs are reproducible for a given corpus).
    pub seed: u64,
    /// Largest input the mutator produces.
    pub max_len: usize,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Corpus entries replayed.
    pub replayed: usize,
    /// Mutated inputs executed.
    pub executed: u64,
    /// Distinct outcome signatures seen.
    pub signatures: usize,
    /// Working corpus size at the end.
    pub corpus: usize,
}

/// A panic found by the fuzzer.
#[derive(Clone, Debug)]
pub struct Crash {
    /// The input.
    pub input: Vec<u8>,
    /// The panic message.
    pub message: String,
}

/// splitmix64: small, fast, good enough to drive mutations.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Tokens worth inserting into TOML text: syntax, odd numbers, and every key of the
/// corpus (so mutations recombine real keys with wrong types and values).
pub fn dictionary(corpus: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut words: HashSet<Vec<u8>> = [
        "=",
        "[",
        "]",
        "[[",
        "]]",
        "{",
        "}",
        ",",
        "\"",
        "'",
        "\n",
        "#",
        ".",
        "-",
        "+",
        "0",
        "-1",
        "1e309",
        "-1e309",
        "nan",
        "inf",
        "-inf",
        "0x10",
        "1_000",
        "true",
        "false",
        "\"\"",
        "[]",
        "{}",
        "18446744073709551616",
        "9223372036854775807",
        "-0.0",
        "1e-320",
        "\u{feff}",
        "\"\"\"",
        "\\u0000",
        "1979-05-27T07:32:00Z",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    for entry in corpus {
        let text = String::from_utf8_lossy(entry);
        for line in text.lines() {
            if let Some((key, _)) = line.split_once('=') {
                let key = key.trim();
                if !key.is_empty() && key.len() < 40 && !key.contains(' ') {
                    words.insert(key.as_bytes().to_vec());
                }
            }
            let line = line.trim();
            if line.starts_with('[') && line.ends_with(']') && line.len() < 40 {
                words.insert(line.as_bytes().to_vec());
            }
        }
    }
    let mut out: Vec<Vec<u8>> = words.into_iter().collect();
    out.sort();
    out
}

/// Applies one to four random mutations to `input`.
pub fn mutate(
    input: &[u8],
    corpus: &[Vec<u8>],
    dict: &[Vec<u8>],
    rng: &mut Rng,
    max_len: usize,
) -> Vec<u8> {
    let mut out = input.to_vec();
    let n = 1 + rng.below(4);
    for _ in 0..n {
        let len = out.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = rng.next_u64() as u8;
            }
            2 => {
                let i = rng.below(len + 1);
                let k = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..k).map(|_| rng.next_u64() as u8).collect();
                out.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let k = 1 + rng.below((len - i).min(32));
                out.drain(i..i + k);
            }
            4 if len > 0 => {
                // Duplicate a range (repeated tables, keys, chunk records).
                let i = rng.below(len);
                let k = 1 + rng.below((len - i).min(64));
                let piece = out[i..i + k].to_vec();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, piece);
            }
            5 if !corpus.is_empty() => {
                // Splice: our head, another entry's tail.
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            6 | 7 if !dict.is_empty() => {
                let word = &dict[rng.below(dict.len())];
                let i = rng.below(len + 1);
                if rng.below(2) == 0 || len == 0 {
                    out.splice(i..i, word.iter().copied());
                } else {
                    // Overwrite a token-sized piece.
                    let end = (i + word.len()).min(len);
                    out.splice(i..end, word.iter().copied());
                }
            }
            _ if len > 0 => {
                // Interesting integers over a byte run (binary targets).
                let i = rng.below(len);
                let v: [u8; 8] = match rng.below(6) {
                    0 => 0u64.to_le_bytes(),
                    1 => u64::MAX.to_le_bytes(),
                    2 => (i64::MAX as u64).to_le_bytes(),
                    3 => f64::NAN.to_bits().to_le_bytes(),
                    4 => 1u64.to_le_bytes(),
                    _ => (rng.next_u64() & 0xFF).to_le_bytes(),
                };
                let k = (1 + rng.below(8)).min(len - i);
                out[i..i + k].copy_from_slice(&v[..k]);
            }
            _ => {}
        }
    }
    out.truncate(max_len);
    out
}

/// Runs `target` on `input`, turning a panic into a [`Crash`].
pub fn run_one(target: Target, input: &[u8]) -> Result<u64, Crash> {
    std::panic::catch_unwind(AssertUnwindSafe(|| target(input))).map_err(|p| Crash {
        input: input.to_vec(),
        message: p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic".into()),
    })
}

/// Replays `corpus`, then mutates it within `budget`. Stops at the first crash.
pub fn fuzz(target: Target, corpus: Vec<Vec<u8>>, budget: &Budget) -> Result<Stats, Crash> {
    // The default hook would print every caught panic; the crash is reported once.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = fuzz_quietly(target, corpus, budget);
    std::panic::set_hook(hook);
    result
}

fn fuzz_quietly(target: Target, corpus: Vec<Vec<u8>>, budget: &Budget) -> Result<Stats, Crash> {
    let mut stats = Stats::default();
    let mut seen = HashSet::new();
    let mut work: Vec<Vec<u8>> = Vec::with_capacity(corpus.len() + 1024);
    for input in corpus {
        seen.insert(run_one(target, &input)?);
        stats.replayed += 1;
        work.push(input);
    }
    if work.is_empty() {
        work.push(Vec::new());
    }
    let dict = dictionary(&work);
    let mut rng = Rng::new(budget.seed);
    let started = Instant::now();
    while stats.executed < budget.iterations && started.elapsed() < budget.time {
        let parent = &work[rng.below(work.len())];
        let input = mutate(parent, &work, &dict, &mut rng, budget.max_len);
        let sig = run_one(target, &input)?;
        stats.executed += 1;
        if seen.insert(sig) && work.len() < 8192 {
            work.push(input);
        }
    }
    stats.signatures = seen.len();
    stats.corpus = work.len();
    Ok(stats)
}

/// Reads every file of `dir` (sorted by name), skipping sub-directories.
pub fn load_corpus(dir: &Path) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    entries
        .into_iter()
        .map(|p| std::fs::read(&p).map(|b| (p, b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panics_on_magic(data: &[u8]) -> u64 {
        if data.windows(4).any(|w| w == b"BOOM") {
            panic!("found the magic word");
        }
        data.len() as u64 % 7
    }

    #[test]
    fn the_runner_finds_a_planted_panic_and_keeps_the_input() {
        // The dictionary holds the corpus's keys, so "BOOM = 1" offers the word.
        let corpus = vec![b"BOOM = 1".to_vec(), b"x".to_vec()];
        let safe_corpus = vec![b"x".to_vec()];
        let budget = Budget {
            iterations: 100_000,
            time: Duration::from_secs(30),
            seed: 1,
            max_len: 256,
        };
        // The replay alone finds it in the first corpus.
        let crash = fuzz(panics_on_magic, corpus, &budget).unwrap_err();
        assert!(crash.input.windows(4).any(|w| w == b"BOOM"));
        assert!(crash.message.contains("magic"));
        // Without the word anywhere, the run completes its budget.
        let stats = fuzz(
            panics_on_magic,
            safe_corpus,
            &Budget {
                iterations: 2_000,
                ..budget
            },
        )
        .unwrap();
        assert_eq!(stats.executed, 2_000);
        assert!(stats.signatures > 1);
    }

    #[test]
    fn mutation_is_reproducible_from_the_seed() {
        let corpus = vec![b"[control]\nperiod_ms = 20.0\n".to_vec()];
        let dict = dictionary(&corpus);
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|_| mutate(&corpus[0], &corpus, &dict, &mut rng, 1024))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
        assert!(dict.contains(&b"period_ms".to_vec()));
    }
}
