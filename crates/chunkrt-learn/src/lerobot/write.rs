//! Writing the data: the frames as the dataset's Parquet table, and the Arrow columns
//! the metadata tables share.

use super::{Episode, ExportError, Frame};
use arrow_array::builder::{
    BooleanBuilder, FixedSizeListBuilder, Float32Builder, Int64Builder, PrimitiveBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::sync::Arc;

/// A column of `n` values of type `dt` per row.
fn vec_field(name: &str, dt: DataType, n: usize) -> Field {
    Field::new(
        name,
        DataType::FixedSizeList(Arc::new(Field::new("item", dt, true)), n as i32),
        true,
    )
}

/// Rows of `n` values each as a fixed-size list column of Arrow type `T`.
fn fixed_list<T: arrow_array::ArrowPrimitiveType>(rows: &[&[T::Native]], n: usize) -> ArrayRef {
    let mut b = FixedSizeListBuilder::new(PrimitiveBuilder::<T>::new(), n as i32);
    for r in rows {
        b.values().append_slice(r);
        b.append(true);
    }
    Arc::new(b.finish())
}

/// Rows of `n` float32 values each as a fixed-size list column.
fn f32_list(rows: &[&[f32]], n: usize) -> ArrayRef {
    fixed_list::<arrow_array::types::Float32Type>(rows, n)
}

/// A boolean column.
pub(super) fn bools(v: impl Iterator<Item = bool>) -> ArrayRef {
    let mut b = BooleanBuilder::new();
    for x in v {
        b.append_value(x);
    }
    Arc::new(b.finish())
}

/// An int64 column.
pub(super) fn i64s(v: impl Iterator<Item = i64>) -> ArrayRef {
    let mut b = Int64Builder::new();
    for x in v {
        b.append_value(x);
    }
    Arc::new(b.finish())
}

/// Writes `batch` to `path` as one Parquet file, creating its directory.
pub(super) fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<(), ExportError> {
    let err = |what: String| ExportError::Write {
        path: path.to_path_buf(),
        what,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    }
    let file = std::fs::File::create(path).map_err(|e| err(e.to_string()))?;
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None)
        .map_err(|e| err(e.to_string()))?;
    w.write(batch).map_err(|e| err(e.to_string()))?;
    w.close().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The data table of `episodes` at `fps`.
pub(super) fn data_batch(
    episodes: &[Episode],
    fps: u32,
    dof: usize,
) -> Result<RecordBatch, String> {
    let frames: Vec<(usize, usize, &Frame)> = episodes
        .iter()
        .enumerate()
        .flat_map(|(k, e)| e.frames.iter().enumerate().map(move |(i, f)| (k, i, f)))
        .collect();
    let col = |get: &dyn Fn(&Frame) -> &[f32]| -> Vec<&[f32]> {
        frames.iter().map(|(_, _, f)| get(f)).collect()
    };
    let fields = vec![
        vec_field("observation.state", DataType::Float32, 2 * dof),
        vec_field("observation.environment_state", DataType::Float32, dof),
        vec_field("action", DataType::Float32, dof),
        vec_field("action.proposed", DataType::Float32, dof),
        vec_field("action.base", DataType::Float32, dof),
        vec_field("action.residual", DataType::Float32, dof),
        vec_field("gate.mask", DataType::Int64, dof),
        Field::new("gate.blocked", DataType::Boolean, true),
        Field::new("intervention", DataType::Boolean, true),
        Field::new("episode.success", DataType::Boolean, true),
        Field::new("timestamp", DataType::Float32, true),
        Field::new("frame_index", DataType::Int64, true),
        Field::new("episode_index", DataType::Int64, true),
        Field::new("index", DataType::Int64, true),
        Field::new("task_index", DataType::Int64, true),
    ];
    let masks: Vec<&[i64]> = frames.iter().map(|(_, _, f)| f.mask.as_slice()).collect();
    let mut ts = Float32Builder::new();
    for (_, i, _) in &frames {
        ts.append_value((*i as f64 / f64::from(fps)) as f32);
    }
    let mut columns: Vec<ArrayRef> = vec![
        f32_list(&col(&|f| &f.state), 2 * dof),
        f32_list(&col(&|f| &f.goal), dof),
        f32_list(&col(&|f| &f.action), dof),
        f32_list(&col(&|f| &f.proposed), dof),
        f32_list(&col(&|f| &f.base), dof),
        f32_list(&col(&|f| &f.residual), dof),
        fixed_list::<arrow_array::types::Int64Type>(&masks, dof),
        bools(frames.iter().map(|(_, _, f)| f.blocked)),
        bools(frames.iter().map(|(_, _, f)| f.intervention)),
        bools(
            frames
                .iter()
                .map(|(k, _, _)| episodes[*k].outcome == "success"),
        ),
        Arc::new(ts.finish()),
        i64s(frames.iter().map(|(_, i, _)| *i as i64)),
        i64s(frames.iter().map(|(k, _, _)| *k as i64)),
        i64s(0..frames.len() as i64),
        i64s(frames.iter().map(|_| 0)),
    ];
    let mut fields = fields;
    let wrenches: Option<Vec<&[f32]>> =
        frames.iter().map(|(_, _, f)| f.wrench.as_deref()).collect();
    if let Some(w) = wrenches.filter(|w| !w.is_empty()) {
        fields.insert(2, vec_field(FORCE_FEATURE, DataType::Float32, 6));
        columns.insert(2, f32_list(&w, 6));
    }
    if episodes.iter().any(|e| e.image_size.is_some()) {
        let (field, images) = image_column(frames.iter().map(|(_, _, f)| f.image.as_deref()));
        fields.insert(0, field);
        columns.insert(0, images);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
}

/// The wrist force/torque feature: force (N) then torque (N m), base frame.
pub(super) const FORCE_FEATURE: &str = "observation.force";

/// The feature LeRobot names a single camera's image.
pub(super) const IMAGE_FEATURE: &str = "observation.image";

/// The images as Hugging Face `datasets.Image()` stores them: `struct<bytes: binary,
/// path: string>`, the PNG in `bytes`, no path.
fn image_column<'a>(images: impl Iterator<Item = Option<&'a [u8]>>) -> (Field, ArrayRef) {
    let mut bytes = arrow_array::builder::BinaryBuilder::new();
    let mut paths = arrow_array::builder::StringBuilder::new();
    for png in images {
        bytes.append_option(png);
        paths.append_null();
    }
    let parts = arrow_schema::Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ]);
    let array = arrow_array::StructArray::new(
        parts.clone(),
        vec![Arc::new(bytes.finish()), Arc::new(paths.finish())],
        None,
    );
    (
        Field::new(IMAGE_FEATURE, DataType::Struct(parts), true),
        Arc::new(array),
    )
}

/// Writes `value` to `path` as pretty-printed JSON.
pub(super) fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), ExportError> {
    std::fs::write(
        path,
        serde_json::to_string_pretty(value).unwrap_or_default(),
    )
    .map_err(|e| ExportError::Write {
        path: path.to_path_buf(),
        what: e.to_string(),
    })
}
