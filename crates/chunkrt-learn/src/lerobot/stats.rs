//! `meta/stats.json`'s statistics: per numeric feature and dimension, and per image
//! channel.

use super::Frame;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use serde_json::{json, Value};

/// Per channel, how many pixels of each value the frames' images hold.
fn pixel_histograms(frames: &[&Frame]) -> Result<[[u64; 256]; 3], String> {
    let mut h = [[0u64; 256]; 3];
    let mut buf = Vec::new();
    for png_bytes in frames.iter().filter_map(|f| f.image.as_deref()) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(png_bytes))
            .read_info()
            .map_err(|e| e.to_string())?;
        buf.resize(reader.output_buffer_size(), 0);
        let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
        for px in buf[..info.buffer_size()].chunks_exact(3) {
            for c in 0..3 {
                h[c][px[c] as usize] += 1;
            }
        }
    }
    Ok(h)
}

/// LeRobot's image statistics: per channel, of pixels scaled to `[0, 1]`, shaped
/// `[3, 1, 1]`; `count` is the frames.
pub(super) fn image_stats(frames: &[&Frame]) -> Result<Value, String> {
    let h = pixel_histograms(frames)?;
    let per = |f: &dyn Fn(&[u64; 256], u64) -> f64| -> Value {
        json!(h
            .iter()
            .map(|c| vec![vec![f(c, c.iter().sum::<u64>().max(1))]])
            .collect::<Vec<_>>())
    };
    let first = |c: &[u64; 256]| c.iter().position(|n| *n > 0).unwrap_or(0) as f64 / 255.0;
    let last = |c: &[u64; 256]| c.iter().rposition(|n| *n > 0).unwrap_or(0) as f64 / 255.0;
    let mean = |c: &[u64; 256], n: u64| {
        c.iter()
            .enumerate()
            .map(|(v, k)| v as f64 * *k as f64)
            .sum::<f64>()
            / n as f64
            / 255.0
    };
    let std = |c: &[u64; 256], n: u64| {
        let m = mean(c, n) * 255.0;
        let var = c
            .iter()
            .enumerate()
            .map(|(v, k)| (v as f64 - m).powi(2) * *k as f64)
            .sum::<f64>()
            / n as f64;
        var.sqrt() / 255.0
    };
    // The value at rank round((n - 1) p), as the numeric features' quantiles.
    let quantile = |p: f64| {
        move |c: &[u64; 256], n: u64| {
            let rank = ((n - 1) as f64 * p).round() as u64;
            let mut seen = 0;
            for (v, k) in c.iter().enumerate() {
                seen += k;
                if seen > rank {
                    return v as f64 / 255.0;
                }
            }
            1.0
        }
    };
    Ok(json!({
        "min": per(&|c, _| first(c)),
        "max": per(&|c, _| last(c)),
        "mean": per(&mean),
        "std": per(&std),
        "count": [frames.len()],
        "q01": per(&quantile(0.01)), "q10": per(&quantile(0.10)), "q50": per(&quantile(0.50)),
        "q90": per(&quantile(0.90)), "q99": per(&quantile(0.99)),
    }))
}

/// Per feature and dimension: min, max, mean, std (population), count, q01..q99.
pub(super) fn stats(batch: &RecordBatch) -> Value {
    use arrow_array::cast::AsArray;
    let mut out = serde_json::Map::new();
    for (f, col) in batch.schema().fields().iter().zip(batch.columns()) {
        let dims: Vec<Vec<f64>> = match f.data_type() {
            DataType::Struct(_) => continue, // images: `image_stats`
            DataType::FixedSizeList(_, n) => {
                let l = col.as_fixed_size_list();
                let n = *n as usize;
                let mut dims = vec![Vec::with_capacity(l.len()); n];
                for r in 0..l.len() {
                    let v = l.value(r);
                    for (d, dim) in dims.iter_mut().enumerate() {
                        dim.push(value_f64(&v, d));
                    }
                }
                dims
            }
            _ => vec![(0..col.len()).map(|r| value_f64(col, r)).collect()],
        };
        let per = |g: &dyn Fn(&mut Vec<f64>) -> f64| -> Vec<f64> {
            dims.iter().map(|d| g(&mut d.clone())).collect()
        };
        let q = |p: f64| {
            per(&|d: &mut Vec<f64>| {
                d.sort_by(f64::total_cmp);
                if d.is_empty() {
                    0.0
                } else {
                    d[((d.len() - 1) as f64 * p).round() as usize]
                }
            })
        };
        let mean = per(&|d: &mut Vec<f64>| d.iter().sum::<f64>() / d.len().max(1) as f64);
        let std: Vec<f64> = dims
            .iter()
            .zip(&mean)
            .map(|(d, m)| {
                (d.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / d.len().max(1) as f64).sqrt()
            })
            .collect();
        out.insert(
            f.name().clone(),
            json!({
                "min": per(&|d: &mut Vec<f64>| d.iter().copied().fold(f64::INFINITY, f64::min)),
                "max": per(&|d: &mut Vec<f64>| d.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
                "mean": mean,
                "std": std,
                "count": [batch.num_rows()],
                "q01": q(0.01), "q10": q(0.10), "q50": q(0.50), "q90": q(0.90), "q99": q(0.99),
            }),
        );
    }
    Value::Object(out)
}

fn value_f64(a: &ArrayRef, i: usize) -> f64 {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Int64Type};
    match a.data_type() {
        DataType::Float32 => f64::from(a.as_primitive::<Float32Type>().value(i)),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i) as f64,
        DataType::Boolean => f64::from(u8::from(a.as_boolean().value(i))),
        _ => 0.0,
    }
}
