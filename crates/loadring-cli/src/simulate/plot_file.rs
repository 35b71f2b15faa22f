//! A plot's canvas: its size and font, the picture drawn on it in memory,
//! then written in one go, so that a write that fails (a full disk) is
//! reported as the system's error, `--plot F: cannot write the plot: No
//! space left on device`, where the drawing library would report its own
//! debug text.
//!
//! Text is laid out with an embedded DejaVu Sans (plotters' `ab_glyph`
//! feature), so no system font or fontconfig is needed.

use std::error::Error;
use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::plot_format::PlotFormat;
use crate::echo::echo;
use crate::CliError;

pub(super) const SIZE: (u32, u32) = (1600, 1000);
pub(super) const FONT: &str = "sans-serif";

/// Registers the embedded DejaVu Sans as [`FONT`], once per process, so that
/// no system fonts are needed.
fn register_fonts() {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        // The embedded font is a valid TrueType file; if registration ever
        // failed, text would be missing but the plot still drawn.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// A picture that can be drawn on any backend (an SVG text, a bitmap).
pub trait Picture {
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static;
}

/// `picture` as the bytes of a `format` file, [`SIZE`] pixels.
pub fn render(format: PlotFormat, picture: &impl Picture) -> Result<Vec<u8>, String> {
    register_fonts();
    match format {
        PlotFormat::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
                picture
                    .draw_on(&root)
                    .and_then(|()| Ok(root.present()?))
                    .map_err(|e| e.to_string())?;
            }
            Ok(svg.into_bytes())
        }
        PlotFormat::Png => {
            let mut rgb = vec![0; SIZE.0 as usize * SIZE.1 as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
                picture
                    .draw_on(&root)
                    .and_then(|()| Ok(root.present()?))
                    .map_err(|e| e.to_string())?;
            }
            png(&rgb, SIZE)
        }
    }
}

/// `rgb` (3 bytes a pixel, row by row, `width` x `height`) as a PNG file's
/// bytes.
fn png(rgb: &[u8], (width, height): (u32, u32)) -> Result<Vec<u8>, String> {
    use image::ImageEncoder;
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(&mut bytes)
        .write_image(rgb, width, height, image::ColorType::Rgb8)
        .map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// Writes the plot's `bytes` to `path` (`--plot`).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(|e| {
        CliError(format!(
            "--plot {}: cannot write the plot: {e}",
            echo(&path.display().to_string())
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_png_holds_its_pixels() {
        // 2 x 1: a red pixel, then a blue one.
        let rgb = [255, 0, 0, 0, 0, 255];
        let bytes = png(&rgb, (2, 1)).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let decoded = image::load_from_memory(&bytes).unwrap().to_rgb8();
        assert_eq!(decoded.dimensions(), (2, 1));
        assert_eq!(decoded.into_raw(), rgb);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_failed_write_is_the_systems_error_in_one_line() {
        let e = write(Path::new("/dev/full"), b"plot").unwrap_err();
        assert_eq!(
            e.0,
            "--plot /dev/full: cannot write the plot: No space left on device (os error 28)"
        );
    }
}
