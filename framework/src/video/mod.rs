//! Episode videos: the [`Frame`]s an env draws ([`Env::render_rgb`], with
//! a [`Canvas`] for the shapes), and the files they go into
//! ([`VideoWriter`]).
//!
//! People would rather watch a policy than read its return: `rlx rollout
//! --video out.mp4` records an episode of a checkpoint, and
//! `record_video_interval` records the first episode of an evaluation
//! during training. Two formats, chosen by the file's extension:
//!
//! - **GIF**, written here in pure Rust (the `gif` crate): always there,
//!   plays in every browser and Markdown page. A frame of at most 256
//!   colours (every renderer of rlx's own envs) keeps them exactly; a
//!   frame with more (a Gymnasium or Atari screen) is quantized with
//!   NeuQuant;
//! - **MP4** (H.264), through an `ffmpeg` process when one is installed
//!   (Debian: `apt-get install ffmpeg`): a tenth of the GIF's size or less.
//!
//! A video is written to `<name>.part` and renamed when it is finished, so
//! a file with the video's name is always a whole video.
//!
//! ```
//! use rlx::video::{Frame, VideoWriter};
//!
//! let dir = std::env::temp_dir().join(format!("rlx-video-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let mut video = VideoWriter::create(&dir.join("two.gif"), 30).unwrap();
//! video.push(&Frame::filled(4, 2, [255, 255, 255])).unwrap();
//! video.push(&Frame::filled(4, 2, [0, 0, 0])).unwrap();
//! assert_eq!(video.finish().unwrap(), 2);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
//!
//! [`Env::render_rgb`]: crate::Env::render_rgb

mod canvas;

pub use canvas::Canvas;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// One picture of an env: `width × height` pixels, row after row from the
/// top, three bytes (red, green, blue) each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    width: u32,
    height: u32,
    rgb: Vec<u8>,
}

impl Frame {
    /// The frame of `rgb` (`width × height × 3` bytes).
    ///
    /// # Errors
    /// An empty frame, or bytes that do not fill it exactly.
    pub fn new(width: u32, height: u32, rgb: Vec<u8>) -> Result<Self, VideoError> {
        let want = (width as usize).checked_mul(height as usize).and_then(|p| p.checked_mul(3));
        match want {
            Some(n) if n > 0 && n == rgb.len() => Ok(Self { width, height, rgb }),
            _ => Err(VideoError::BadFrame(format!(
                "a {width}×{height} RGB frame has {} bytes, got {}",
                want.map_or_else(|| "too many".to_string(), |n| n.to_string()),
                rgb.len()
            ))),
        }
    }

    /// A `width × height` frame of one colour (for renderers to draw on).
    pub fn filled(width: u32, height: u32, color: [u8; 3]) -> Self {
        let rgb = color.repeat(width as usize * height as usize);
        Self { width, height, rgb }
    }

    /// Width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// The pixels, row after row from the top, RGB.
    pub fn rgb(&self) -> &[u8] {
        &self.rgb
    }

    /// The pixels, mutably (for renderers that draw into the frame).
    pub fn rgb_mut(&mut self) -> &mut [u8] {
        &mut self.rgb
    }

    /// The colour of the pixel in column `x`, row `y` (from the top).
    ///
    /// # Panics
    /// Outside the frame.
    pub fn pixel(&self, x: u32, y: u32) -> [u8; 3] {
        assert!(x < self.width && y < self.height, "pixel ({x}, {y}) outside a {}×{} frame", self.width, self.height);
        let i = 3 * (y as usize * self.width as usize + x as usize);
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }
}

/// What went wrong with a frame or a video file.
#[derive(Debug, thiserror::Error)]
pub enum VideoError {
    /// A frame whose bytes do not fit its size.
    #[error("bad frame: {0}")]
    BadFrame(String),
    /// A file name whose extension is not a video format rlx writes.
    #[error("{path}: rlx writes videos as .gif or .mp4 (by the file's extension)")]
    Format {
        /// The file asked for.
        path: PathBuf,
    },
    /// MP4 asked for without `ffmpeg` on the `PATH`.
    #[error(
        "{path}: MP4 videos are encoded by ffmpeg, and none is on the PATH \
         (Debian/Ubuntu: apt-get install ffmpeg; macOS: brew install ffmpeg), or write a .gif"
    )]
    NoFfmpeg {
        /// The file asked for.
        path: PathBuf,
    },
    /// A frame rate outside 1..=240.
    #[error("a video's frame rate must be 1 to 240 frames per second, got {0}")]
    Fps(u32),
    /// A frame of another size than the video's first.
    #[error("frame {index} is {got:?} pixels and the video's first was {want:?}: an env's frames keep one size")]
    SizeChanged {
        /// The frame's number, from 0.
        index: u64,
        /// Its width and height.
        got: (u32, u32),
        /// The first frame's.
        want: (u32, u32),
    },
    /// A video without a frame.
    #[error("{0}: no frame was recorded, so no video was written")]
    Empty(PathBuf),
    /// Frames too large for a GIF (65,535 pixels a side).
    #[error("{0}: GIF frames are at most 65535 pixels a side")]
    TooLarge(PathBuf),
    /// ffmpeg failed.
    #[error("{path}: ffmpeg failed: {message}")]
    Ffmpeg {
        /// The file being written.
        path: PathBuf,
        /// What it said.
        message: String,
    },
    /// The file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Whether an `ffmpeg` program runs from the `PATH`: MP4 videos need one.
pub fn ffmpeg_available() -> bool {
    Command::new("ffmpeg")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The video formats, by file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Gif,
    Mp4,
}

impl Format {
    fn of(path: &Path) -> Result<Self, VideoError> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("gif") => Ok(Self::Gif),
            Some("mp4") => Ok(Self::Mp4),
            _ => Err(VideoError::Format { path: path.to_path_buf() }),
        }
    }
}

/// Checks that `path` names a video rlx can write here: a `.gif`, or an
/// `.mp4` with ffmpeg installed. For configs and flags, before any frame.
///
/// # Errors
/// As [`VideoWriter::create`].
pub fn check_target(path: &Path) -> Result<(), VideoError> {
    match Format::of(path)? {
        Format::Mp4 if !ffmpeg_available() => Err(VideoError::NoFfmpeg { path: path.to_path_buf() }),
        _ => Ok(()),
    }
}

/// Where the frames go once the first one gave the size.
enum Sink {
    Gif(gif::Encoder<BufWriter<File>>),
    Ffmpeg { child: Child, stdin: ChildStdin },
}

/// Frames into a video file, one by one (see the [module](self) docs).
pub struct VideoWriter {
    path: PathBuf,
    part: PathBuf,
    format: Format,
    fps: u32,
    sink: Option<Sink>,
    size: (u32, u32),
    frames: u64,
}

impl VideoWriter {
    /// A video at `path` (`.gif` or `.mp4`) playing `fps` frames per
    /// second. The file is opened with the first frame, which sets the
    /// size.
    ///
    /// # Errors
    /// Another extension, MP4 without ffmpeg, or a frame rate outside
    /// 1..=240.
    pub fn create(path: &Path, fps: u32) -> Result<Self, VideoError> {
        if !(1..=240).contains(&fps) {
            return Err(VideoError::Fps(fps));
        }
        check_target(path)?;
        let mut part = path.as_os_str().to_owned();
        part.push(".part");
        Ok(Self {
            path: path.to_path_buf(),
            part: PathBuf::from(part),
            format: Format::of(path)?,
            fps,
            sink: None,
            size: (0, 0),
            frames: 0,
        })
    }

    /// The file the video is written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Appends `frame`.
    ///
    /// # Errors
    /// A frame of another size than the first, or the file or ffmpeg
    /// failing.
    pub fn push(&mut self, frame: &Frame) -> Result<(), VideoError> {
        let size = (frame.width, frame.height);
        if self.sink.is_none() {
            self.sink = Some(self.open(size)?);
            self.size = size;
        } else if size != self.size {
            return Err(VideoError::SizeChanged { index: self.frames, got: size, want: self.size });
        }
        let io = |source| VideoError::Io { path: self.part.clone(), source };
        match self.sink.as_mut().expect("opened above") {
            Sink::Gif(encoder) => {
                let delay = (100.0 / f64::from(self.fps)).round().max(2.0) as u16;
                let gif_frame = gif_frame(frame, delay);
                encoder.write_frame(&gif_frame).map_err(|e| match e {
                    gif::EncodingError::Io(source) => io(source),
                    other => VideoError::BadFrame(other.to_string()),
                })?;
            }
            Sink::Ffmpeg { stdin, .. } => {
                if let Err(source) = stdin.write_all(&frame.rgb) {
                    let message = self.ffmpeg_said();
                    return Err(VideoError::Ffmpeg {
                        path: self.path.clone(),
                        message: format!("{source}; {message}"),
                    });
                }
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// Finishes the file and gives it its name; returns the number of
    /// frames.
    ///
    /// # Errors
    /// No frame, or the file or ffmpeg failing (the partial file is then
    /// removed).
    pub fn finish(mut self) -> Result<u64, VideoError> {
        let io = |path: &Path, source| VideoError::Io { path: path.to_path_buf(), source };
        match self.sink.take() {
            None => return Err(VideoError::Empty(self.path.clone())),
            Some(Sink::Gif(encoder)) => {
                let writer = encoder.into_inner().map_err(|e| io(&self.part, e))?;
                writer
                    .into_inner()
                    .map_err(|e| io(&self.part, e.into_error()))?
                    .sync_all()
                    .map_err(|e| io(&self.part, e))?;
            }
            Some(Sink::Ffmpeg { mut child, stdin }) => {
                drop(stdin);
                let status = child.wait().map_err(|e| io(&self.part, e))?;
                if !status.success() {
                    let mut said = String::new();
                    if let Some(mut err) = child.stderr.take() {
                        let _ = err.read_to_string(&mut said);
                    }
                    let message = format!("{status}: {}", said.trim());
                    return Err(VideoError::Ffmpeg { path: self.path.clone(), message });
                }
            }
        }
        std::fs::rename(&self.part, &self.path).map_err(|e| io(&self.path, e))?;
        Ok(self.frames)
    }

    fn open(&self, (width, height): (u32, u32)) -> Result<Sink, VideoError> {
        let io = |source| VideoError::Io { path: self.part.clone(), source };
        match self.format {
            Format::Gif => {
                let (Ok(w), Ok(h)) = (u16::try_from(width), u16::try_from(height)) else {
                    return Err(VideoError::TooLarge(self.path.clone()));
                };
                let file = File::create(&self.part).map_err(io)?;
                let mut encoder = gif::Encoder::new(BufWriter::new(file), w, h, &[]).map_err(|e| match e {
                    gif::EncodingError::Io(source) => io(source),
                    other => VideoError::BadFrame(other.to_string()),
                })?;
                encoder.set_repeat(gif::Repeat::Infinite).map_err(|e| VideoError::BadFrame(e.to_string()))?;
                Ok(Sink::Gif(encoder))
            }
            Format::Mp4 => {
                let mut child = Command::new("ffmpeg")
                    .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24"])
                    .args(["-s", &format!("{width}x{height}"), "-r", &self.fps.to_string(), "-i", "-"])
                    // H.264 in yuv420p (what players expect) needs even sides.
                    .args(["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264", "-pix_fmt", "yuv420p"])
                    .args(["-f", "mp4"])
                    .arg(&self.part)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|_| VideoError::NoFfmpeg { path: self.path.clone() })?;
                let stdin = child.stdin.take().expect("stdin is piped");
                Ok(Sink::Ffmpeg { child, stdin })
            }
        }
    }

    /// What ffmpeg said before it stopped reading frames.
    fn ffmpeg_said(&mut self) -> String {
        let Some(Sink::Ffmpeg { child, .. }) = self.sink.as_mut() else { return String::new() };
        let _ = child.wait();
        let mut said = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut said);
        }
        said.trim().to_string()
    }
}

impl Drop for VideoWriter {
    /// An unfinished video leaves no file behind.
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            if let Sink::Ffmpeg { mut child, stdin } = sink {
                drop(stdin);
                let _ = child.kill();
                let _ = child.wait();
            }
            let _ = std::fs::remove_file(&self.part);
        }
    }
}

/// `frame` as a GIF frame shown for `delay` hundredths of a second: its
/// exact colours when there are at most 256 of them, NeuQuant's palette
/// otherwise.
fn gif_frame(frame: &Frame, delay: u16) -> gif::Frame<'static> {
    let (w, h) = (frame.width as u16, frame.height as u16);
    let mut index: HashMap<[u8; 3], u8> = HashMap::new();
    let mut palette = Vec::new();
    let mut pixels = Vec::with_capacity(frame.rgb.len() / 3);
    // Drawn frames are mostly runs of one colour: the last one is checked
    // before the map (a 600×400 frame is 240,000 lookups otherwise).
    let mut last: Option<([u8; 3], u8)> = None;
    for p in frame.rgb.chunks_exact(3) {
        let color = [p[0], p[1], p[2]];
        if let Some((_, i)) = last.filter(|(c, _)| *c == color) {
            pixels.push(i);
            continue;
        }
        let i = match index.get(&color) {
            Some(&i) => i,
            None if index.len() < 256 => {
                let i = index.len() as u8;
                index.insert(color, i);
                palette.extend_from_slice(&color);
                i
            }
            None => {
                let mut quantized = gif::Frame::from_rgb_speed(w, h, &frame.rgb, 10);
                quantized.delay = delay;
                return quantized;
            }
        };
        last = Some((color, i));
        pixels.push(i);
    }
    gif::Frame {
        width: w,
        height: h,
        delay,
        palette: Some(palette),
        buffer: std::borrow::Cow::Owned(pixels),
        ..gif::Frame::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rlx-video-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Frames of a moving square: frame `k` has it at column `k`.
    fn square(k: u32) -> Frame {
        let mut f = Frame::filled(16, 8, [255, 255, 255]);
        for y in 2..6 {
            for x in k..k + 4 {
                let i = 3 * (y * 16 + x) as usize;
                f.rgb_mut()[i..i + 3].copy_from_slice(&[200, 30, 40]);
            }
        }
        f
    }

    #[test]
    fn a_gif_decodes_to_the_frames_written() {
        let path = dir("gif").join("square.gif");
        let mut video = VideoWriter::create(&path, 25).unwrap();
        for k in 0..5 {
            video.push(&square(k)).unwrap();
        }
        assert!(!path.exists(), "the video has its name once finished");
        assert_eq!(video.finish().unwrap(), 5);
        let mut options = gif::DecodeOptions::new();
        options.set_color_output(gif::ColorOutput::RGBA);
        let mut decoder = options.read_info(File::open(&path).unwrap()).unwrap();
        let mut k = 0;
        while let Some(frame) = decoder.read_next_frame().unwrap() {
            assert_eq!((frame.width, frame.height, frame.delay), (16, 8, 4));
            let want = square(k);
            for (i, p) in frame.buffer.chunks_exact(4).enumerate() {
                assert_eq!(&p[..3], &want.rgb()[3 * i..3 * i + 3], "frame {k} pixel {i}");
            }
            k += 1;
        }
        assert_eq!(k, 5);
    }

    #[test]
    fn many_colours_are_quantized_not_refused() {
        let path = dir("many").join("noise.gif");
        let rgb: Vec<u8> = (0..64 * 64 * 3).map(|i| (i * 7919 % 251) as u8).collect();
        let mut video = VideoWriter::create(&path, 30).unwrap();
        video.push(&Frame::new(64, 64, rgb).unwrap()).unwrap();
        assert_eq!(video.finish().unwrap(), 1);
        let decoder = gif::DecodeOptions::new().read_info(File::open(&path).unwrap()).unwrap();
        assert_eq!((decoder.width(), decoder.height()), (64, 64));
    }

    #[test]
    fn bad_input_is_named() {
        let d = dir("bad");
        let err = VideoWriter::create(&d.join("x.avi"), 30).err().unwrap().to_string();
        assert!(err.contains("x.avi") && err.contains(".gif or .mp4"), "{err}");
        assert!(VideoWriter::create(&d.join("x.gif"), 0).err().unwrap().to_string().contains("got 0"));
        assert!(Frame::new(2, 2, vec![0; 11]).unwrap_err().to_string().contains("12 bytes, got 11"));
        let mut video = VideoWriter::create(&d.join("sizes.gif"), 30).unwrap();
        video.push(&Frame::filled(4, 4, [0, 0, 0])).unwrap();
        let err = video.push(&Frame::filled(4, 5, [0, 0, 0])).unwrap_err().to_string();
        assert!(err.contains("frame 1") && err.contains("(4, 5)"), "{err}");
        drop(video);
        assert!(
            !d.join("sizes.gif").exists() && !d.join("sizes.gif.part").exists(),
            "an abandoned video leaves nothing"
        );
        let err = VideoWriter::create(&d.join("none.gif"), 30).unwrap().finish().unwrap_err().to_string();
        assert!(err.contains("no frame"), "{err}");
    }
}
