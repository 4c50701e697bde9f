//! What every figure shares: the colours, the bundled font, the `Figure` trait, the
//! legend, saving as SVG and PNG, and labels.

use super::PlotError;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Colour-blind friendly line colours (Okabe-Ito).
pub const COLOURS: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
];

/// The font family every figure uses (registered from the bundled file).
pub const FONT: &str = "sans-serif";

static DEJAVU: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The file is bundled and known to parse; a failure would show as a
        // drawing error naming the font, not a panic.
        let _ = register_font(FONT, FontStyle::Normal, DEJAVU);
        let _ = register_font(FONT, FontStyle::Bold, DEJAVU);
    });
}

/// A figure that can draw itself on any plotters backend.
pub trait Figure {
    /// Size in pixels (the SVG's user units).
    fn size(&self) -> (u32, u32);
    /// Draws onto `root` (already filled white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>;
}

/// Draws `chart`'s legend at `position`: white, half-transparent, framed.
pub fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    font_px: u32,
) -> Result<(), PlotError>
where
    DB: DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, font_px))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// A plotters error as a [`PlotError::Draw`].
pub fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Draws `fig` into `STEM.svg` and `STEM.png`; the paths written.
pub fn save(fig: &impl Figure, stem: &Path) -> Result<Vec<PathBuf>, PlotError> {
    register_fonts();
    let size = fig.size();
    let svg = stem.with_extension("svg");
    let png = stem.with_extension("png");
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw(&root)?;
        root.present().map_err(|e| PlotError::Write {
            file: svg.clone(),
            message: e.to_string(),
        })?;
    }
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw(&root)?;
        root.present().map_err(|e| PlotError::Write {
            file: png.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(vec![svg, png])
}

/// Draws `fig` into an SVG document in memory (for tests and callers that write it
/// themselves).
pub fn svg_string(fig: &impl Figure) -> Result<String, PlotError> {
    register_fonts();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, fig.size()).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        fig.draw(&root)?;
        root.present().map_err(err)?;
    }
    Ok(s)
}

/// A value in seconds as a short label with a unit (`250 us`, `12.5 ms`, `1.2 s`).
pub fn seconds_label(s: f64) -> String {
    let a = s.abs();
    let (v, unit) = if a >= 1.0 || a == 0.0 {
        (s, "s")
    } else if a >= 1e-3 {
        (s * 1e3, "ms")
    } else {
        (s * 1e6, "us")
    };
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} {unit}")
}

/// The text contents of an SVG document's `<text>` elements, trimmed (plotters
/// writes them on lines of their own).
pub fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_labels_pick_the_unit_and_drop_trailing_zeros() {
        assert_eq!(seconds_label(250e-6), "250 us");
        assert_eq!(seconds_label(0.0125), "12.5 ms");
        assert_eq!(seconds_label(1.2), "1.2 s");
        assert_eq!(seconds_label(0.0), "0 s");
        assert_eq!(seconds_label(1e-3), "1 ms");
    }
}
