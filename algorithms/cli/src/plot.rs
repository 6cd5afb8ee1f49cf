//! Learning-curve PNGs: mean episode return against env steps.
//!
//! [`render_learning_curves`] draws any number of [`Series`] into one PNG;
//! [`plot_runs`] reads the `result.json` of several run directories and
//! overlays their curves, one coloured line each, with a legend. A run's
//! [`ResultsWriter`](crate::results::ResultsWriter) keeps its own
//! `learning_curve.png` up to date with the same code.
//!
//! ```no_run
//! use rlx_cli::plot::{plot_runs, render_learning_curves, Series};
//! use std::path::{Path, PathBuf};
//!
//! let curve = Series { label: "ppo".into(), points: vec![(0.0, 10.0), (4000.0, 80.0), (8000.0, 200.0)] };
//! render_learning_curves(&[curve], Path::new("curve.png"), (800, 500))?;
//! let runs = [PathBuf::from("results/ppo_CartPole-v1_a"), PathBuf::from("results/ppo_CartPole-v1_b")];
//! plot_runs(&runs, Path::new("compare.png"), (800, 500))?;
//! # Ok::<(), rlx_cli::plot::PlotError>(())
//! ```
//!
//! # Fonts
//!
//! Text (title, tick labels, axis labels, legend) is drawn with plotters'
//! pure-Rust `ab_glyph` rasterizer, which needs the bytes of a TrueType font.
//! rlx does not bundle one: a font file is hundreds of kilobytes of someone
//! else's licensed data in every build, for a plot that every desktop and
//! most servers can already label with a font they have. The font is looked
//! up once per process, the first time a plot is drawn:
//!
//! 1. the file named by the `RLX_PLOT_FONT` environment variable, if set;
//! 2. common system fonts: DejaVu Sans, Liberation Sans and Noto Sans at their
//!    Debian/Ubuntu, Fedora and Arch paths, Arial on macOS
//!    (`/System/Library/Fonts/Supplemental/Arial.ttf`, `/Library/Fonts/Arial.ttf`)
//!    and on Windows (`C:\Windows\Fonts\arial.ttf`).
//!
//! The first file that parses as a font is used. If none does, plots are
//! still drawn — frame, grid and curves — but without any text, and a
//! warning naming `RLX_PLOT_FONT` is logged once.
//!
//! PNGs are written atomically (a temporary file next to the target, then a
//! rename), so a viewer that reloads the file while training runs never sees
//! half an image.

use crate::results::{read_results, write_atomic};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One curve: `(env steps, mean episode return)` points in step order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// The name in the legend (and the title when it is the only curve).
    pub label: String,
    /// `(x, y)` points; non-finite ones are skipped.
    pub points: Vec<(f64, f64)>,
}

/// Why a plot could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// [`plot_runs`] was given no directories.
    #[error("no run directories to plot")]
    NoRuns,
    /// A run directory has no `result.json`.
    #[error("{}: not found; is {} a run's results directory?", path.display(), dir.display())]
    MissingResults {
        /// The run directory.
        dir: PathBuf,
        /// The `result.json` that is missing.
        path: PathBuf,
    },
    /// A `result.json` could not be read or parsed (the source names the file).
    #[error("cannot read run results: {source}")]
    ReadResults {
        /// The `result.json`.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// A run has iterations but none of them has an episode return yet (no
    /// episode finished), so there is nothing to draw.
    #[error("{}: no iteration has an episode_reward_mean yet (has any episode finished?)", path.display())]
    NoReturns {
        /// The `result.json`.
        path: PathBuf,
    },
    /// The requested image is too small to hold a chart.
    #[error("{}: a plot of {}x{} pixels is too small (at least {}x{})", path.display(), size.0, size.1, MIN_SIZE.0, MIN_SIZE.1)]
    TooSmall {
        /// The PNG that was to be written.
        path: PathBuf,
        /// The requested size.
        size: (u32, u32),
    },
    /// Drawing or PNG encoding failed.
    #[error("{}: rendering the plot failed: {message}", path.display())]
    Render {
        /// The PNG that was to be written.
        path: PathBuf,
        /// The drawing library's error.
        message: String,
    },
    /// The PNG could not be written (the source names the file).
    #[error("cannot write the plot: {source}")]
    Write {
        /// The PNG.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
}

/// The smallest image [`render_learning_curves`] draws, in pixels.
pub const MIN_SIZE: (u32, u32) = (200, 150);

/// Label of the x axis.
const X_DESC: &str = "env steps";
/// Label of the y axis.
const Y_DESC: &str = "episode return (mean of last 100)";
/// The family the looked-up font is registered under. A name of our own
/// rather than `"sans-serif"`, so that text drawn with a default style that
/// we forgot to override fails loudly instead of depending on what else
/// registered a font in the process.
const FONT_FAMILY: &str = "rlx-plot-sans";
/// The environment variable naming a TTF/OTF file to label plots with.
pub const FONT_ENV: &str = "RLX_PLOT_FONT";
/// Where common systems keep a plain sans-serif font, most likely first.
const SYSTEM_FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/google-noto/NotoSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "/Library/Fonts/Arial.ttf",
    r"C:\Windows\Fonts\arial.ttf",
];

/// Matplotlib's `tab10` colours, one per curve (cycled past ten).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws `series` as lines of mean episode return against env steps and
/// writes them to `path` as a PNG of `size` (width, height) pixels.
///
/// With more than one series a legend shows their labels; a single series'
/// label is the title instead. Series without points are left out; if none
/// has any, the empty axes are drawn. See the [module docs](self) for fonts.
///
/// # Errors
/// If `size` is below [`MIN_SIZE`], drawing fails, or the file cannot be
/// written; the error names `path`.
pub fn render_learning_curves(series: &[Series], path: &Path, size: (u32, u32)) -> Result<(), PlotError> {
    let png = render_png(series, size, font_registered()).map_err(|e| e.at(path))?;
    write_atomic(path, &png).map_err(|source| PlotError::Write { path: path.to_path_buf(), source })
}

/// Overlays the learning curves of run directories (each with a
/// `result.json`, as written by [`ResultsWriter`](crate::results::ResultsWriter))
/// in one PNG at `out`, labelled with the directories' names.
///
/// # Errors
/// If `dirs` is empty, a directory has no readable `result.json` or no
/// iteration with an episode return yet, or rendering fails; the error names
/// the file.
pub fn plot_runs(dirs: &[PathBuf], out: &Path, size: (u32, u32)) -> Result<(), PlotError> {
    if dirs.is_empty() {
        return Err(PlotError::NoRuns);
    }
    let mut series = Vec::new();
    for dir in dirs {
        series.extend(read_series(dir)?);
    }
    render_learning_curves(&series, out, size)
}

/// One run directory's curve, and its evaluations' if it has any.
fn read_series(dir: &Path) -> Result<Vec<Series>, PlotError> {
    let path = dir.join("result.json");
    if !path.is_file() {
        return Err(PlotError::MissingResults { dir: dir.to_path_buf(), path });
    }
    let results = read_results(&path).map_err(|source| PlotError::ReadResults { path: path.clone(), source })?;
    let points: Vec<_> =
        results.iter().filter_map(|r| Some((r.timesteps_total as f64, r.episode_reward_mean?))).collect();
    if points.is_empty() {
        return Err(PlotError::NoReturns { path });
    }
    let label = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    let evaluations: Vec<_> = results
        .iter()
        .filter_map(|r| Some((r.timesteps_total as f64, r.evaluation.as_ref()?.episode_reward_mean)))
        .collect();
    let mut series = vec![Series { label: label.clone(), points }];
    if !evaluations.is_empty() {
        series.push(Series { label: format!("{label} (evaluation)"), points: evaluations });
    }
    Ok(series)
}

/// A rendering error before the path it concerns is known.
struct RenderError(Result<String, (u32, u32)>);

impl RenderError {
    fn at(self, path: &Path) -> PlotError {
        let path = path.to_path_buf();
        match self.0 {
            Ok(message) => PlotError::Render { path, message },
            Err(size) => PlotError::TooSmall { path, size },
        }
    }
}

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for RenderError {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        Self(Ok(e.to_string()))
    }
}

/// Draws the chart into an RGB buffer and encodes it as PNG. `text: false`
/// draws no text at all (no font is needed).
fn render_png(series: &[Series], (w, h): (u32, u32), text: bool) -> Result<Vec<u8>, RenderError> {
    if w < MIN_SIZE.0 || h < MIN_SIZE.1 {
        return Err(RenderError(Err((w, h))));
    }
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw_chart(&root, series, text)?;
        root.present()?;
    }
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let encode = |e: png::EncodingError| RenderError(Ok(format!("encoding the PNG: {e}")));
    let mut writer = encoder.write_header().map_err(encode)?;
    writer.write_image_data(&rgb).map_err(encode)?;
    writer.finish().map_err(encode)?;
    Ok(png)
}

fn draw_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[Series],
    text: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let curves: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| (s.label.as_str(), s.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect()))
        .collect();
    let (x_range, y_range) = ranges(curves.iter().flat_map(|(_, p)| p.iter().copied()));

    let mut builder = ChartBuilder::on(root);
    builder.margin(20);
    if text {
        builder.margin_right(30).x_label_area_size(50).y_label_area_size(80);
        if let [(title, _)] = curves.as_slice() {
            if !title.is_empty() {
                builder.caption(*title, (FONT_FAMILY, 22));
            }
        }
    }
    let mut chart = builder.build_cartesian_2d(x_range, y_range)?;

    let x_fmt = |x: &f64| si(*x);
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(BLACK.mix(0.05)).bold_line_style(BLACK.mix(0.15));
    if text {
        mesh.x_desc(X_DESC)
            .y_desc(Y_DESC)
            .x_label_formatter(&x_fmt)
            .label_style((FONT_FAMILY, 14))
            .axis_desc_style((FONT_FAMILY, 16));
    }
    mesh.draw()?;
    if !text {
        // No label areas means no axis lines either: frame the plot instead.
        let area = chart.plotting_area().strip_coord_spec();
        let (pw, ph) = area.dim_in_pixel();
        area.draw(&Rectangle::new([(0, 0), (pw as i32 - 1, ph as i32 - 1)], BLACK.stroke_width(1)))?;
    }

    for (i, (label, points)) in curves.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let drawn = if let [p] = points.as_slice() {
            // A single point is no line; mark it so the run still shows.
            chart.draw_series(std::iter::once(Circle::new(*p, 3, color.filled())))?
        } else {
            chart.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
        };
        if !label.is_empty() {
            drawn
                .label(*label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
    }
    if text && curves.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font((FONT_FAMILY, 14))
            .draw()?;
    }
    Ok(())
}

/// Axis ranges covering `points` with a little room, never empty.
fn ranges(points: impl Iterator<Item = (f64, f64)>) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for (x, y) in points {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        return (0.0..1000.0, 0.0..1.0);
    }
    // Env steps start at 0: anchor the x axis there unless the data is negative.
    let x0 = x0.min(0.0);
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let pad = if y1 > y0 { (y1 - y0) * 0.05 } else { y0.abs().max(1.0) * 0.1 };
    (x0..x1, y0 - pad..y1 + pad)
}

/// `1500000` → `"1.5M"`: env step counts get long.
fn si(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{scaled:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

/// Finds and registers a font once per process; `false` when none was found
/// (then plots are drawn without text, and a warning was logged).
fn font_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        let from_env = std::env::var_os(FONT_ENV).map(PathBuf::from);
        let candidates = from_env.iter().cloned().chain(SYSTEM_FONTS.iter().map(PathBuf::from));
        for path in candidates {
            let Ok(bytes) = std::fs::read(&path) else {
                if from_env.as_ref() == Some(&path) {
                    tracing::warn!(path = %path.display(), "{FONT_ENV} names a file that cannot be read; trying system fonts");
                }
                continue;
            };
            // plotters keeps fonts for the life of the process and wants
            // `&'static` bytes: leak this one file, once.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            match register_font(FONT_FAMILY, FontStyle::Normal, bytes) {
                Ok(()) => {
                    tracing::debug!(path = %path.display(), "plot font");
                    return true;
                }
                Err(_) => tracing::warn!(path = %path.display(), "not a usable TrueType/OpenType font; skipping"),
            }
        }
        tracing::warn!(
            "no font found for plot labels: drawing plots without text; set {FONT_ENV} to a .ttf file to label them"
        );
        false
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::ResultsWriter;
    use rlx::TrainResult;
    use std::fs::File;
    use std::io::BufReader;

    /// A fresh, empty directory under the system temp dir.
    pub(crate) fn temp_dir(name: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rlx-test-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Decodes a whole PNG: its size and RGB(A) pixels.
    pub(crate) fn decode_png(path: &Path) -> ((u32, u32), png::ColorType, Vec<u8>) {
        let mut reader = png::Decoder::new(BufReader::new(File::open(path).unwrap())).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        ((info.width, info.height), info.color_type, buf)
    }

    fn count_color(rgb: &[u8], c: RGBColor) -> usize {
        rgb.chunks_exact(3).filter(|p| p == &[c.0, c.1, c.2]).count()
    }

    fn curve(label: &str, scale: f64) -> Series {
        Series {
            label: label.into(),
            points: (0..50).map(|i| (i as f64 * 2000.0, scale * (i as f64).sqrt())).collect(),
        }
    }

    #[test]
    fn renders_a_png_of_the_requested_size() {
        let dir = temp_dir("plot-size");
        let path = dir.join("curve.png");
        render_learning_curves(&[curve("ppo", 30.0)], &path, (800, 500)).unwrap();
        let ((w, h), color, rgb) = decode_png(&path);
        assert_eq!((w, h), (800, 500));
        assert_eq!(color, png::ColorType::Rgb);
        assert!(count_color(&rgb, PALETTE[0]) > 200, "the curve is drawn in the first colour");
        assert!(!dir.join("curve.tmp").exists(), "the temporary file was renamed away");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn draws_text_when_a_font_is_found() {
        // This machine is expected to have one of the system fonts (CI installs DejaVu).
        assert!(font_registered(), "no font found; set {FONT_ENV}");
        let with = render_png(&[curve("a", 1.0), curve("b", 2.0)], (800, 500), true).unwrap_or_else(|e| {
            panic!("{}", e.at(Path::new("x")));
        });
        let without = render_png(&[curve("a", 1.0), curve("b", 2.0)], (800, 500), false).unwrap_or_else(|e| {
            panic!("{}", e.at(Path::new("x")));
        });
        assert_ne!(with, without);
    }

    #[test]
    fn draws_without_a_font() {
        // No text style may be used when `text` is false: any would name
        // FONT_FAMILY or plotters' default family, and "sans-serif" is never registered.
        let png = render_png(&[curve("a", 1.0), curve("b", -2.0)], (400, 300), false)
            .unwrap_or_else(|e| panic!("{}", e.at(Path::new("x"))));
        let dir = temp_dir("plot-nofont");
        let path = dir.join("p.png");
        std::fs::write(&path, png).unwrap();
        let ((w, h), _, rgb) = decode_png(&path);
        assert_eq!((w, h), (400, 300));
        assert!(count_color(&rgb, PALETTE[1]) > 50, "the second curve is drawn in the second colour");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn empty_and_degenerate_series_still_render() {
        let dir = temp_dir("plot-degenerate");
        let path = dir.join("p.png");
        render_learning_curves(&[], &path, (300, 200)).unwrap();
        let one = Series { label: "x".into(), points: vec![(0.0, 5.0), (f64::NAN, 1.0)] };
        render_learning_curves(&[one, Series::default()], &path, (300, 200)).unwrap();
        assert_eq!(decode_png(&path).0, (300, 200));
        let err = render_learning_curves(&[], &path, (10, 10)).unwrap_err();
        assert!(matches!(err, PlotError::TooSmall { .. }), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn write_run(dir: &Path, returns: &[Option<f64>]) {
        let mut w = ResultsWriter::create(dir, &"params").unwrap().with_plot_interval(std::time::Duration::MAX);
        for (i, r) in returns.iter().enumerate() {
            let i = i as u64 + 1;
            w.append(&TrainResult {
                training_iteration: i,
                timesteps_total: 1000 * i,
                episode_reward_mean: *r,
                ..Default::default()
            })
            .unwrap();
        }
    }

    #[test]
    fn plot_runs_overlays_run_directories() {
        let root = temp_dir("plot-runs");
        let (a, b) = (root.join("ppo_a"), root.join("ppo_b"));
        write_run(&a, &[None, Some(10.0), Some(40.0), Some(90.0)]);
        write_run(&b, &[Some(5.0), Some(20.0)]);
        let out = root.join("compare.png");
        plot_runs(&[a.clone(), b.clone()], &out, (640, 480)).unwrap();
        let ((w, h), _, rgb) = decode_png(&out);
        assert_eq!((w, h), (640, 480));
        assert!(count_color(&rgb, PALETTE[0]) > 0 && count_color(&rgb, PALETTE[1]) > 0, "both runs are drawn");
        assert_eq!(read_series(&a).unwrap()[0].label, "ppo_a");
        assert_eq!(read_series(&a).unwrap()[0].points, vec![(2000.0, 10.0), (3000.0, 40.0), (4000.0, 90.0)]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn plot_runs_errors_name_the_problem_and_path() {
        let root = temp_dir("plot-errors");
        let out = root.join("out.png");
        let missing = root.join("not_a_run");
        std::fs::create_dir_all(&missing).unwrap();
        let err = plot_runs(std::slice::from_ref(&missing), &out, (640, 480)).unwrap_err();
        assert!(matches!(err, PlotError::MissingResults { .. }), "{err:?}");
        assert!(err.to_string().contains(&missing.join("result.json").display().to_string()), "{err}");

        let no_returns = root.join("early");
        write_run(&no_returns, &[None, None]);
        let err = plot_runs(std::slice::from_ref(&no_returns), &out, (640, 480)).unwrap_err();
        assert!(matches!(err, PlotError::NoReturns { .. }), "{err:?}");
        assert!(err.to_string().contains(&no_returns.join("result.json").display().to_string()), "{err}");

        let garbled = root.join("garbled");
        std::fs::create_dir_all(&garbled).unwrap();
        std::fs::write(garbled.join("result.json"), "{not json\n").unwrap();
        let err = plot_runs(std::slice::from_ref(&garbled), &out, (640, 480)).unwrap_err();
        assert!(err.to_string().contains(&garbled.join("result.json").display().to_string()), "{err}");

        // An output in a directory that does not exist is named as given, not as the temporary file.
        let run = root.join("run");
        write_run(&run, &[Some(1.0)]);
        let nowhere = root.join("nodir").join("x.png");
        let err = plot_runs(std::slice::from_ref(&run), &nowhere, (640, 480)).unwrap_err();
        assert!(matches!(err, PlotError::Write { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains(&nowhere.display().to_string()), "{message}");
        assert!(message.contains("does not exist") && !message.contains("x.tmp"), "{message}");

        assert!(matches!(plot_runs(&[], &out, (640, 480)), Err(PlotError::NoRuns)));
        assert!(!out.exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn si_suffixes() {
        assert_eq!(si(0.0), "0");
        assert_eq!(si(500.0), "500");
        assert_eq!(si(1500.0), "1.5k");
        assert_eq!(si(2_000_000.0), "2M");
        assert_eq!(si(1_234_567.0), "1.23M");
    }
}
