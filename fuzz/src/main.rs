//! `chunkrt-fuzz TARGET [--iterations N] [--seconds S] [--seed N] [--corpus DIR]
//! [--crashes DIR] [--max-len BYTES] [--replay FILE]`: replays the corpus of TARGET
//! (`config`, `manifest`, `chunks`), then mutates it within the bounds. Exit 0: no
//! panic; 1: a panic (the input is written under the crashes directory); 2: usage
//! error. `--replay FILE` runs one input with the default panic hook (backtrace).

use chunkrt_fuzz::runner::{fuzz, load_corpus, Budget};
use chunkrt_fuzz::targets::{by_name, TARGETS};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

struct Args {
    target: String,
    budget: Budget,
    corpus: PathBuf,
    crashes: PathBuf,
    replay: Option<PathBuf>,
}

fn usage() -> String {
    let names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    format!(
        "usage: chunkrt-fuzz TARGET [--iterations N] [--seconds S] [--seed N] [--corpus DIR] \
         [--crashes DIR] [--max-len BYTES] [--replay FILE]\n  TARGET: one of {}",
        names.join(", ")
    )
}

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let target = it.next().ok_or_else(usage)?;
    if by_name(&target).is_none() {
        return Err(format!("unknown target `{target}`\n{}", usage()));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = Args {
        corpus: root.join("corpus").join(&target),
        crashes: root.join("crashes").join(&target),
        replay: None,
        target,
        budget: Budget {
            iterations: 100_000,
            time: Duration::from_secs(60),
            seed: 0x5eed,
            max_len: 16 * 1024,
        },
    };
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag}: expected a value\n{}", usage()))?;
        let num = || -> Result<u64, String> {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag}: `{value}` is not a whole number"))
        };
        match flag.as_str() {
            "--iterations" => args.budget.iterations = num()?,
            "--seconds" => args.budget.time = Duration::from_secs(num()?),
            "--seed" => args.budget.seed = num()?,
            "--max-len" => args.budget.max_len = num()? as usize,
            "--corpus" => args.corpus = PathBuf::from(&value),
            "--crashes" => args.crashes = PathBuf::from(&value),
            "--replay" => args.replay = Some(PathBuf::from(&value)),
            _ => return Err(format!("unknown option `{flag}`\n{}", usage())),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("chunkrt-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let target = by_name(&args.target).expect("checked in parse");
    if let Some(file) = &args.replay {
        // Runs one input with the default panic hook, for a backtrace.
        let input = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("chunkrt-fuzz: {}: {e}", file.display());
                return ExitCode::from(2);
            }
        };
        println!("outcome {:016x}", target(&input));
        return ExitCode::SUCCESS;
    }
    let corpus = match load_corpus(&args.corpus) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("chunkrt-fuzz: corpus {}: {e}", args.corpus.display());
            return ExitCode::from(2);
        }
    };
    let inputs: Vec<Vec<u8>> = corpus.into_iter().map(|(_, b)| b).collect();
    let started = std::time::Instant::now();
    match fuzz(target, inputs, &args.budget) {
        Ok(stats) => {
            println!(
                "chunkrt-fuzz {}: no panic; {} corpus inputs replayed, {} mutated inputs in {:.1} s, \
                 {} distinct outcomes, working corpus {}",
                args.target,
                stats.replayed,
                stats.executed,
                started.elapsed().as_secs_f64(),
                stats.signatures,
                stats.corpus
            );
            ExitCode::SUCCESS
        }
        Err(crash) => {
            let _ = std::fs::create_dir_all(&args.crashes);
            let name = format!("crash-{:016x}", fnv1a(&crash.input));
            let path = args.crashes.join(name);
            let saved = std::fs::write(&path, &crash.input);
            eprintln!(
                "chunkrt-fuzz {}: PANIC: {}\n  input ({} bytes) {}",
                args.target,
                crash.message,
                crash.input.len(),
                match saved {
                    Ok(()) => format!("saved to {}", path.display()),
                    Err(e) => format!("could not be saved: {e}"),
                }
            );
            ExitCode::from(1)
        }
    }
}

/// FNV-1a, to name crash files by content.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
