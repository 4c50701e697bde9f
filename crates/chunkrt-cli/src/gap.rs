//! `chunkrt gap`: the reality gap between two plants, channel by channel
//! (`chunkrt-gap`), as a table, `gap.json` and a figure.

mod figure;
mod omission;

use anyhow::{bail, Context};
use chunkrt_config::Config;
use chunkrt_gap::{compare, measure_plant, GapRow, GapSetup, PlantMeasurement, Tolerances};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// `chunkrt gap`.
#[derive(Parser, Debug, Clone)]
pub struct GapArgs {
    /// The reference plant's run config (e.g. the simulator the policy was trained on).
    #[arg(long, required_unless_present = "from_json")]
    pub reference: Option<PathBuf>,
    /// The plant compared with it (another simulator, EtherCAT, the real arm).
    #[arg(long, required_unless_present = "from_json")]
    pub plant: Option<PathBuf>,
    /// Appends the over-tolerance rows to this policy manifest's `[[omission_log]]`
    /// (the measurement copied beside it and cited by digest).
    #[arg(long, value_name = "MANIFEST")]
    pub omission_log: Option<PathBuf>,
    /// Measures nothing: appends the rows of this earlier `gap.json` (with
    /// `--omission-log`).
    #[arg(
        long,
        value_name = "GAP_JSON",
        requires = "omission_log",
        conflicts_with_all = ["reference", "plant"]
    )]
    pub from_json: Option<PathBuf>,
    /// Where gap.json, gap.svg, gap.png and every excitation run go
    /// (`reference/joint-N`, `plant/joint-N`).
    #[arg(long, default_value = "runs/gap")]
    pub out: PathBuf,
    /// The joints excited, one run each on each plant: `0,3` or `all`.
    #[arg(long, default_value = "0")]
    pub joints: String,
    /// Probe frequencies (Hz), whole multiples of 1 / --window-s.
    #[arg(long, value_delimiter = ',', default_value = "1,2,5,10")]
    pub freqs_hz: Vec<f64>,
    /// The window the frequency response is read over (s).
    #[arg(long, default_value_t = 5.0)]
    pub window_s: f64,
    /// Time before the probe, its last half the hold (s).
    #[arg(long, default_value_t = 3.0)]
    pub settle_s: f64,
}

/// The joints `--joints` names on an arm of `n` joints.
fn parse_joints(s: &str, n: usize) -> anyhow::Result<Vec<usize>> {
    if s == "all" {
        return Ok((0..n).collect());
    }
    s.split(',')
        .map(|j| {
            j.trim()
                .parse::<usize>()
                .ok()
                .filter(|&j| j < n)
                .with_context(|| {
                    format!(
                        "--joints {s}: `{j}` is not a joint of this arm (0 to {})",
                        n - 1
                    )
                })
        })
        .collect()
}

/// Runs `chunkrt gap`.
pub fn gap(args: &GapArgs) -> anyhow::Result<u8> {
    if let (Some(json), Some(manifest)) = (&args.from_json, &args.omission_log) {
        return append_omissions(json, manifest).map(|_| 0);
    }
    let (Some(reference_path), Some(plant_path)) = (&args.reference, &args.plant) else {
        bail!("--reference and --plant name the two plants (or --from-json an earlier gap.json)");
    };
    let (reference, plant) = load_plants(reference_path, plant_path)?;
    let setup = gap_setup(args, &reference, &plant)?;
    chunkrt_rt::signals::install().map_err(anyhow::Error::msg)?;
    chunkrt_rt::signals::loaded();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    outln!(
        "gap: {} joint(s) excited, {:.1} s each, on {} then {}",
        setup.joints.len(),
        setup.run_s(),
        reference_path.display(),
        plant_path.display()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let name = |p: &Path| p.display().to_string();
    let r = measure_plant(
        &reference,
        &name(reference_path),
        &setup,
        &args.out.join("reference"),
        stop.clone(),
    )?;
    let p = measure_plant(
        &plant,
        &name(plant_path),
        &setup,
        &args.out.join("plant"),
        stop,
    )?;
    let tol = Tolerances::default();
    let rows = compare(&r, &p, &tol);
    print_table(&rows);
    let over = rows.iter().filter(|r| r.over).count();
    let path = args.out.join("gap.json");
    let doc = gap_json(&r, &p, &setup, &tol, &rows);
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    let fig = figure::GapFigure::new(&r, &p);
    let written =
        chunkrt_telemetry::plot::save(&fig, &args.out.join("gap")).map_err(anyhow::Error::msg)?;
    outln!(
        "{over} of {} rows over tolerance; wrote {}, {} and {}",
        rows.len(),
        path.display(),
        written[0].display(),
        written[1].display()
    );
    if let Some(manifest) = &args.omission_log {
        append_omissions(&path, manifest)?;
    }
    Ok(if over == 0 { 0 } else { crate::exit::EXIT_FAIL })
}

/// The two plants' run configs; refused unless they are the same arm (as many joints).
fn load_plants(reference_path: &Path, plant_path: &Path) -> anyhow::Result<(Config, Config)> {
    let reference = crate::setup::load_config(reference_path)?;
    let plant = crate::setup::load_config(plant_path)?;
    if reference.control.joints != plant.control.joints {
        bail!(
            "{} has {} joints, {} has {}: the plants must be the same arm",
            reference_path.display(),
            reference.control.joints,
            plant_path.display(),
            plant.control.joints
        );
    }
    Ok((reference, plant))
}

/// The excitation from the command line, checked against both plants.
fn gap_setup(args: &GapArgs, reference: &Config, plant: &Config) -> anyhow::Result<GapSetup> {
    let setup = GapSetup {
        joints: parse_joints(&args.joints, reference.control.joints)?,
        freqs_hz: args.freqs_hz.clone(),
        window_s: args.window_s,
        settle_s: args.settle_s,
        hold_s: args.settle_s / 2.0,
        ..GapSetup::default()
    };
    setup.check(reference)?;
    setup.check(plant)?;
    Ok(setup)
}

/// `gap.json`: both measurements, the setup, the tolerances and the rows
/// (`docs/reference/gap.schema.json` is its schema).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(title = "gap.json")]
pub struct GapJson<'a> {
    /// The reference plant's figures.
    reference: &'a PlantMeasurement,
    /// The figures of the plant compared with it.
    plant: &'a PlantMeasurement,
    /// The excitation both plants got.
    setup: GapSetupJson<'a>,
    /// The tolerance of each metric.
    tolerances: &'a Tolerances,
    /// One row per metric, channel and joint.
    rows: &'a [GapRow],
    /// How many rows are over their tolerance.
    over: usize,
}

/// The excitation of `gap.json`.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct GapSetupJson<'a> {
    /// The joints excited, one run each.
    joints: &'a [usize],
    /// Probe frequencies (Hz).
    freqs_hz: &'a [f64],
    /// The DFT window (s).
    window_s: f64,
    /// Time from the start to the probe (s).
    settle_s: f64,
    /// The hold's window before the probe (s).
    hold_s: f64,
    /// The servo policy's gain (1/s).
    servo_gain_per_s: f64,
}

fn gap_json<'a>(
    r: &'a PlantMeasurement,
    p: &'a PlantMeasurement,
    setup: &'a GapSetup,
    tol: &'a Tolerances,
    rows: &'a [GapRow],
) -> GapJson<'a> {
    GapJson {
        reference: r,
        plant: p,
        setup: GapSetupJson {
            joints: &setup.joints,
            freqs_hz: &setup.freqs_hz,
            window_s: setup.window_s,
            settle_s: setup.settle_s,
            hold_s: setup.hold_s,
            servo_gain_per_s: setup.servo_gain_per_s,
        },
        tolerances: tol,
        rows,
        over: rows.iter().filter(|r| r.over).count(),
    }
}

/// `--omission-log`: appends the over rows of `json` to `manifest`; returns how many
/// rows were over tolerance.
fn append_omissions(json: &Path, manifest: &Path) -> anyhow::Result<usize> {
    let a = omission::append(json, manifest)?;
    outln!(
        "omission log of {}: {} entr(ies) appended, {} already logged; measurement {}",
        manifest.display(),
        a.entries,
        a.already,
        a.measurement.display()
    );
    Ok(a.entries + a.already)
}

fn print_table(rows: &[GapRow]) {
    outln!(
        "{:<9} {:<22} {:>5} {:>12} {:>12} {:>12} {:>10}  verdict",
        "channel",
        "metric",
        "joint",
        "reference",
        "plant",
        "difference",
        "tolerance"
    );
    for r in rows {
        let joint = r.joint.map_or("-".to_string(), |j| j.to_string());
        let tol = r.tolerance.map_or("-".to_string(), |t| format!("{t:.4}"));
        let verdict = match (r.tolerance, r.over) {
            (None, _) => "not judged",
            (_, true) => "OVER",
            _ => "ok",
        };
        outln!(
            "{:<9} {:<22} {:>5} {:>12.5} {:>12.5} {:>12.5} {:>10}  {verdict}",
            r.channel,
            r.metric,
            joint,
            r.reference,
            r.plant,
            r.difference,
            tol
        );
    }
}
