//! [`Canvas`]: the few shapes an env's picture is made of, filled into a
//! [`Frame`] without anti-aliasing (every colour stays exact, so a GIF
//! keeps it).

use super::Frame;

/// A frame being drawn: pixel coordinates, `x` to the right and `y` down
/// from the top-left corner; shapes are clipped to the frame.
///
/// ```
/// use rlx::video::Canvas;
///
/// let mut canvas = Canvas::new(20, 10, [255, 255, 255]);
/// canvas.fill_rect((2.0, 2.0), (8.0, 6.0), [0, 0, 0]);
/// canvas.fill_circle((15.0, 5.0), 3.0, [200, 0, 0]);
/// let frame = canvas.into_frame();
/// assert_eq!(frame.pixel(4, 4), [0, 0, 0]);
/// assert_eq!(frame.pixel(15, 5), [200, 0, 0]);
/// assert_eq!(frame.pixel(0, 9), [255, 255, 255]);
/// ```
pub struct Canvas {
    frame: Frame,
}

impl Canvas {
    /// A `width × height` canvas of `background`.
    pub fn new(width: u32, height: u32, background: [u8; 3]) -> Self {
        Self { frame: Frame::filled(width, height, background) }
    }

    /// The finished frame.
    pub fn into_frame(self) -> Frame {
        self.frame
    }

    /// Width and height in pixels.
    pub fn size(&self) -> (u32, u32) {
        (self.frame.width, self.frame.height)
    }

    /// Fills the polygon through `points` (in order; it closes itself):
    /// the pixels whose centres lie inside it, by the even-odd rule.
    pub fn fill_polygon(&mut self, points: &[(f64, f64)], color: [u8; 3]) {
        if points.len() < 3 {
            return;
        }
        let (w, h) = (self.frame.width as usize, self.frame.height as usize);
        let (lo, hi) = points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
        let first = lo.floor().max(0.0) as usize;
        let last = (hi.ceil().max(0.0) as usize).min(h);
        let mut crossings = Vec::new();
        for y in first..last {
            let yc = y as f64 + 0.5;
            crossings.clear();
            for (i, &(x0, y0)) in points.iter().enumerate() {
                let (x1, y1) = points[(i + 1) % points.len()];
                if (y0 <= yc) != (y1 <= yc) {
                    crossings.push(x0 + (yc - y0) / (y1 - y0) * (x1 - x0));
                }
            }
            crossings.sort_by(f64::total_cmp);
            for pair in crossings.chunks_exact(2) {
                // Pixels whose centre x + 0.5 lies in [pair[0], pair[1]).
                let from = (pair[0] - 0.5).ceil().max(0.0) as usize;
                let to = ((pair[1] - 0.5).ceil().max(0.0) as usize).min(w);
                for x in from..to {
                    self.put(x, y, color);
                }
            }
        }
    }

    /// Fills the rectangle between corners `a` and `b`.
    pub fn fill_rect(&mut self, a: (f64, f64), b: (f64, f64), color: [u8; 3]) {
        self.fill_polygon(&[a, (b.0, a.1), b, (a.0, b.1)], color);
    }

    /// Fills the circle of `radius` around `center`.
    pub fn fill_circle(&mut self, center: (f64, f64), radius: f64, color: [u8; 3]) {
        let (w, h) = (self.frame.width as usize, self.frame.height as usize);
        let ys = ((center.1 - radius).floor().max(0.0) as usize)..((center.1 + radius).ceil().max(0.0) as usize).min(h);
        let xs = ((center.0 - radius).floor().max(0.0) as usize)..((center.0 + radius).ceil().max(0.0) as usize).min(w);
        for y in ys {
            for x in xs.clone() {
                let (dx, dy) = (x as f64 + 0.5 - center.0, y as f64 + 0.5 - center.1);
                if dx * dx + dy * dy <= radius * radius {
                    self.put(x, y, color);
                }
            }
        }
    }

    /// A straight bar `width` pixels wide from `a` to `b`.
    pub fn line(&mut self, a: (f64, f64), b: (f64, f64), width: f64, color: [u8; 3]) {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let len = (dx * dx + dy * dy).sqrt();
        if len == 0.0 {
            return;
        }
        // Half the width, across the bar.
        let (nx, ny) = (-dy / len * width / 2.0, dx / len * width / 2.0);
        self.fill_polygon(
            &[(a.0 + nx, a.1 + ny), (b.0 + nx, b.1 + ny), (b.0 - nx, b.1 - ny), (a.0 - nx, a.1 - ny)],
            color,
        );
    }

    fn put(&mut self, x: usize, y: usize, color: [u8; 3]) {
        let i = 3 * (y * self.frame.width as usize + x);
        self.frame.rgb[i..i + 3].copy_from_slice(&color);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(frame: &Frame, color: [u8; 3]) -> usize {
        frame.rgb().chunks_exact(3).filter(|p| *p == color).count()
    }

    #[test]
    fn shapes_cover_their_area() {
        let ink = [1, 2, 3];
        let mut c = Canvas::new(100, 100, [255; 3]);
        c.fill_rect((10.0, 10.0), (30.0, 20.0), ink);
        assert_eq!(count(&c.into_frame(), ink), 200, "a 20×10 rectangle");
        let mut c = Canvas::new(100, 100, [255; 3]);
        c.fill_circle((50.0, 50.0), 20.0, ink);
        let area = count(&c.into_frame(), ink) as f64;
        assert!((area - std::f64::consts::PI * 400.0).abs() < 30.0, "{area}");
        let mut c = Canvas::new(100, 100, [255; 3]);
        c.line((10.0, 10.0), (70.0, 90.0), 4.0, ink);
        let area = count(&c.into_frame(), ink) as f64;
        assert!((area - 400.0).abs() < 30.0, "100 long, 4 wide: {area}");
    }

    #[test]
    fn shapes_outside_the_frame_are_clipped() {
        let ink = [9, 9, 9];
        let mut c = Canvas::new(10, 10, [0; 3]);
        c.fill_rect((-50.0, -50.0), (5.0, 200.0), ink);
        c.fill_circle((500.0, 500.0), 3.0, ink);
        c.line((-5.0, -5.0), (-5.0, 50.0), 3.0, ink);
        assert_eq!(count(&c.into_frame(), ink), 50);
    }
}
