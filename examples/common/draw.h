// The drawing layer under the example figures: Cairo paths (anti-aliased) and Pango text in a
// real font (DejaVu Sans, Debian's fonts-dejavu-core). render() runs one drawing function on a
// PNG surface and again on an SVG surface, so every figure comes as path.png and path.svg, both
// written atomically. https://www.cairographics.org/manual/ and https://docs.gtk.org/Pango/
#pragma once
#include <cstdint>
#include <functional>
#include <string>

using cairo_t = struct _cairo;
using PangoLayout = struct _PangoLayout;

namespace nabla::viz {

struct Rgb {
  uint8_t r, g, b;
};

inline constexpr Rgb kInk{34, 34, 34}, kGrey{110, 110, 110}, kGridLine{228, 228, 228},
    kWhite{255, 255, 255};

struct TextStyle {
  double size = 12;  // pixels
  bool bold = false;
  Rgb color = kInk;
  bool markup = false;  // Pango markup (<sup>, <b>); plain text otherwise, so "<eos>" is literal
};

// The figures' text: titles, axis labels, tick labels and legend entries.
inline constexpr TextStyle kTitleStyle{16, true}, kLabelStyle{13},
    kTickStyle{11, false, {68, 68, 68}}, kLegendStyle{12};

// Where the anchor point lies on the text's box, along and across the (possibly rotated) line.
enum class Anchor { kStart, kMiddle, kEnd };

struct TextSize {
  double width, height;
};

class Painter {
 public:
  Painter(cairo_t* cr, PangoLayout* layout) : cr_(cr), layout_(layout) {}
  cairo_t* cairo() const { return cr_; }

  void fill_rect(double x, double y, double w, double h, Rgb c, double alpha = 1);
  void stroke_rect(double x, double y, double w, double h, Rgb c, double width = 1);
  void line(double x0, double y0, double x1, double y1, Rgb c, double width = 1);
  void circle(double x, double y, double radius, Rgb c);

  TextSize measure(const std::string& text, const TextStyle& style);
  // Draws text with its box's (h, v) point at (x, y), rotated by `degrees` counter-clockwise
  // about that point. Returns the unrotated size.
  TextSize text(double x, double y, const std::string& text, const TextStyle& style,
                Anchor h = Anchor::kStart, Anchor v = Anchor::kStart, double degrees = 0);

  // A (rows x cols) block of colours, each source pixel `scale` x `scale` device pixels (no
  // smoothing), with its top-left corner at (x, y). pixel(i, j) gives the colour.
  void pixels(double x, double y, int rows, int cols, int scale,
              const std::function<Rgb(int, int)>& pixel);

 private:
  void set_layout(const std::string& text, const TextStyle& style);
  cairo_t* cr_;
  PangoLayout* layout_;
};

// Draws a width x height figure with `draw` into `path` (PNG) and the same path with the
// extension .svg. Throws IOError when no font is installed or a file cannot be written, and
// ValueError for a size outside 1..16384.
void render(const std::string& path, int width, int height,
            const std::function<void(Painter&)>& draw);

// A text's size before a figure's size is known (a layout pass): same fonts and options as render.
TextSize measure_text(const std::string& text, const TextStyle& style);

// The SVG written beside a PNG: `path` with its extension replaced by .svg.
std::string svg_path(const std::string& png_path);

// Relative luminance (WCAG 2) of a colour: text on a cell is white above dark colours.
double luminance(Rgb c);

}  // namespace nabla::viz
