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
use std::io::{BufWriter, Write};
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
    /// An `ffmpeg` without the H.264 encoder rlx asks it for.
    #[error("{path}: the ffmpeg on the PATH has no libx264 (H.264) encoder; install a full ffmpeg or write a .gif")]
    NoH264 {
        /// The file asked for.
        path: PathBuf,
    },
    /// A frame rate outside 1..=240 (1..=50 for GIF, whose delays are
    /// whole hundredths of a second, at least 2).
    #[error("a video's frame rate must be 1 to 240 frames per second (GIF: 1 to 50), got {0}")]
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
    /// An env that draws no frames ([`Env::render_rgb`](crate::Env::render_rgb) gave `None`).
    #[error("{env} draws no frames (Env::render_rgb), so its episodes cannot be recorded")]
    NoFrames {
        /// The env's name.
        env: String,
    },
    /// Frames too large for a GIF (65,535 pixels a side).
    #[error("{path}: GIF frames are at most 65535 pixels a side; this one is {size:?}")]
    TooLarge {
        /// The file asked for.
        path: PathBuf,
        /// The frame's width and height.
        size: (u32, u32),
    },
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

/// Whether the `ffmpeg` on the `PATH` has the libx264 encoder MP4s use.
fn ffmpeg_has_h264() -> bool {
    Command::new("ffmpeg")
        .args(["-hide_banner", "-h", "encoder=libx264"])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("libx264"))
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
        Format::Mp4 if !ffmpeg_has_h264() => Err(VideoError::NoH264 { path: path.to_path_buf() }),
        _ => Ok(()),
    }
}

/// Where the frames go once the first one gave the size.
enum Sink {
    Gif(gif::Encoder<BufWriter<File>>),
    /// ffmpeg's messages go to `log` (a file: a pipe nobody reads while
    /// frames are written could fill up and stall it).
    Ffmpeg {
        child: Child,
        stdin: ChildStdin,
        log: PathBuf,
    },
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
    /// Another extension, MP4 without ffmpeg (or its H.264 encoder), or a
    /// frame rate outside 1..=240 (1..=50 for GIF).
    pub fn create(path: &Path, fps: u32) -> Result<Self, VideoError> {
        let most = if Format::of(path)? == Format::Gif { 50 } else { 240 };
        if !(1..=most).contains(&fps) {
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
    /// An empty frame, a frame of another size than the first, or the file
    /// or ffmpeg failing.
    pub fn push(&mut self, frame: &Frame) -> Result<(), VideoError> {
        let size = (frame.width, frame.height);
        if frame.width == 0 || frame.height == 0 {
            return Err(VideoError::BadFrame(format!("frame {} is {}×{} pixels", self.frames, size.0, size.1)));
        }
        if self.sink.is_none() {
            self.sink = Some(self.open(size)?);
            self.size = size;
        } else if size != self.size {
            return Err(VideoError::SizeChanged { index: self.frames, got: size, want: self.size });
        }
        let io = |source| VideoError::Io { path: self.part.clone(), source };
        match self.sink.as_mut().expect("opened above") {
            Sink::Gif(encoder) => {
                // Delays are whole hundredths: frame k ends at round(100·(k+1)/fps),
                // so the rounding does not add up (30 fps: 3, 4, 3, 3, 4, 3, ...).
                let end = |k: u64| (100 * k + u64::from(self.fps) / 2) / u64::from(self.fps);
                let delay = (end(self.frames + 1) - end(self.frames)) as u16;
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

    /// Appends the frame `env` drew (what its
    /// [`Env::render_rgb`](crate::Env::render_rgb) returned).
    ///
    /// # Errors
    /// `None`, naming the env that draws no frames; else as
    /// [`push`](Self::push).
    pub fn push_drawn(&mut self, env: &str, drawn: Option<Frame>) -> Result<(), VideoError> {
        let frame = drawn.ok_or_else(|| VideoError::NoFrames { env: env.into() })?;
        self.push(&frame)
    }

    /// Finishes the file and gives it its name; returns the number of
    /// frames.
    ///
    /// # Errors
    /// No frame, or the file or ffmpeg failing (the partial file is then
    /// removed).
    pub fn finish(mut self) -> Result<u64, VideoError> {
        let written = self.close();
        if written.is_err() {
            let _ = std::fs::remove_file(&self.part);
        }
        written
    }

    /// [`finish`](Self::finish) but for removing the partial file.
    fn close(&mut self) -> Result<u64, VideoError> {
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
            Some(Sink::Ffmpeg { mut child, stdin, log }) => {
                drop(stdin);
                let status = child.wait().map_err(|e| io(&self.part, e));
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                let _ = std::fs::remove_file(&log);
                let status = status?;
                if !status.success() {
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
                    return Err(VideoError::TooLarge { path: self.path.clone(), size: (width, height) });
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
                let mut log = self.part.as_os_str().to_owned();
                log.push(".log");
                let log = PathBuf::from(log);
                let messages = File::create(&log).map_err(io)?;
                let mut child = Command::new("ffmpeg")
                    .args(["-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24"])
                    .args(["-s", &format!("{width}x{height}"), "-r", &self.fps.to_string(), "-i", "-"])
                    // H.264 in yuv420p (what players expect) needs even sides.
                    .args(["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264", "-pix_fmt", "yuv420p"])
                    .args(["-f", "mp4"])
                    .arg(&self.part)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(messages)
                    .spawn()
                    .map_err(|e| {
                        let _ = std::fs::remove_file(&log);
                        match e.kind() {
                            std::io::ErrorKind::NotFound => VideoError::NoFfmpeg { path: self.path.clone() },
                            _ => VideoError::Ffmpeg { path: self.path.clone(), message: format!("cannot start: {e}") },
                        }
                    })?;
                let stdin = child.stdin.take().expect("stdin is piped");
                Ok(Sink::Ffmpeg { child, stdin, log })
            }
        }
    }

    /// What ffmpeg said before it stopped reading frames.
    fn ffmpeg_said(&mut self) -> String {
        let Some(Sink::Ffmpeg { child, log, .. }) = self.sink.as_mut() else { return String::new() };
        let _ = child.wait();
        std::fs::read_to_string(log).unwrap_or_default().trim().to_string()
    }
}

impl Drop for VideoWriter {
    /// An unfinished video leaves no file behind.
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            match sink {
                Sink::Ffmpeg { mut child, stdin, log } => {
                    drop(stdin);
                    let _ = child.kill();
                    let _ = child.wait();
                    let _ = std::fs::remove_file(log);
                }
                // The encoder writes its trailer when dropped: before the removal.
                gif => drop(gif),
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
        let err = VideoWriter::create(&d.join("fast.gif"), 60).err().unwrap().to_string();
        assert!(err.contains("GIF: 1 to 50") && err.contains("got 60"), "{err}");
        let mut video = VideoWriter::create(&d.join("empty.gif"), 30).unwrap();
        let err = video.push(&Frame::filled(0, 4, [0, 0, 0])).unwrap_err().to_string();
        assert!(err.contains("0×4"), "{err}");
        let err = video.push(&Frame::filled(70_000, 1, [0, 0, 0])).unwrap_err().to_string();
        assert!(err.contains("65535") && err.contains("(70000, 1)"), "{err}");
    }

    /// Whole hundredths of a second per frame, without drift: 30 frames at
    /// 30 fps last one second.
    #[test]
    fn gif_delays_add_up_to_the_frame_rate() {
        let path = dir("delays").join("second.gif");
        let mut video = VideoWriter::create(&path, 30).unwrap();
        for k in 0..30 {
            video.push(&square(k % 12)).unwrap();
        }
        video.finish().unwrap();
        let mut decoder = gif::DecodeOptions::new().read_info(File::open(&path).unwrap()).unwrap();
        let mut delays = Vec::new();
        while let Some(frame) = decoder.read_next_frame().unwrap() {
            delays.push(frame.delay);
        }
        assert_eq!(delays.len(), 30);
        assert_eq!(delays.iter().map(|&d| u32::from(d)).sum::<u32>(), 100, "{delays:?}");
        assert!(delays.iter().all(|&d| d == 3 || d == 4), "{delays:?}");
    }

    /// A video that cannot be finished (here its name is taken by a
    /// folder) leaves neither the video nor its partial file.
    #[test]
    fn a_failed_finish_leaves_no_partial_file() {
        let d = dir("failed-finish");
        let path = d.join("taken.gif");
        let mut video = VideoWriter::create(&path, 30).unwrap();
        video.push(&square(0)).unwrap();
        std::fs::create_dir_all(path.join("inside")).unwrap();
        let err = video.finish().unwrap_err().to_string();
        assert!(err.contains("taken.gif"), "{err}");
        assert!(!d.join("taken.gif.part").exists(), "the partial file was left behind");
        std::fs::remove_dir_all(&path).unwrap();
    }

    /// Odd sides are padded to even ones for H.264 (with ffmpeg; skipped
    /// without it unless RLX_REQUIRE_FFMPEG=1).
    #[test]
    fn an_odd_sized_mp4_is_padded_to_even_sides() {
        if !ffmpeg_available() {
            assert!(std::env::var("RLX_REQUIRE_FFMPEG").as_deref() != Ok("1"), "RLX_REQUIRE_FFMPEG=1 but no ffmpeg");
            println!("skipped: no ffmpeg on the PATH");
            return;
        }
        let path = dir("odd").join("odd.mp4");
        let mut video = VideoWriter::create(&path, 10).unwrap();
        for k in 0..3u8 {
            video.push(&Frame::filled(7, 5, [40 * k, 100, 200])).unwrap();
        }
        assert_eq!(video.finish().unwrap(), 3);
        let out = Command::new("ffprobe")
            .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
            .args(["-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "8,6,3");
        assert!(!dir("odd").join("odd.mp4.part.log").exists(), "ffmpeg's log was left behind");
    }
}
