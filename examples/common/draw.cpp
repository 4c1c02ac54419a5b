#include "examples/common/draw.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <fmt/format.h>
#include <fontconfig/fontconfig.h>
#include <pango/pangocairo.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numbers>

#include "nabla/core/error.h"
#include "nabla/core/io/safetensors.h"

namespace nabla::viz {

namespace {

// Tried in order by fontconfig; the first is Debian's fonts-dejavu-core.
constexpr const char* kFontFamilies = "DejaVu Sans,Liberation Sans,Sans";

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using SurfacePtr =
    std::unique_ptr<cairo_surface_t, Deleter<cairo_surface_t, cairo_surface_destroy>>;
using CairoPtr = std::unique_ptr<cairo_t, Deleter<cairo_t, cairo_destroy>>;
using FontOptionsPtr = std::unique_ptr<cairo_font_options_t,
                                       Deleter<cairo_font_options_t, cairo_font_options_destroy>>;
using FontDescriptionPtr =
    std::unique_ptr<PangoFontDescription,
                    Deleter<PangoFontDescription, pango_font_description_free>>;
void unref_object(PangoLayout* p) { g_object_unref(p); }
using LayoutPtr = std::unique_ptr<PangoLayout, Deleter<PangoLayout, unref_object>>;

// Without any font Pango draws nothing (or boxes) and says nothing: refuse instead.
void require_fonts() {
  static const int fonts = [] {
    FcFontSet* set = FcConfigGetFonts(FcConfigGetCurrent(), FcSetSystem);
    return set ? set->nfont : 0;
  }();
  if (fonts == 0)
    throw IOError(
        "plot: fontconfig finds no fonts, so figures would have no text; install "
        "fonts-dejavu-core (scripts/setup.sh does)");
}

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

void check(cairo_status_t status, const std::string& path, const char* what) {
  if (status != CAIRO_STATUS_SUCCESS)
    throw IOError(fmt::format("{}: {} failed ({})", path, what, cairo_status_to_string(status)));
}

// A Pango layout on `cr` with unhinted metrics: text measures the same on the PNG and the SVG
// surface (and in measure_text), so all lay out alike.
LayoutPtr make_layout(cairo_t* cr) {
  LayoutPtr layout(pango_cairo_create_layout(cr));
  FontOptionsPtr options(cairo_font_options_create());
  cairo_font_options_set_hint_metrics(options.get(), CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_hint_style(options.get(), CAIRO_HINT_STYLE_SLIGHT);
  cairo_font_options_set_antialias(options.get(), CAIRO_ANTIALIAS_GRAY);
  pango_cairo_context_set_font_options(pango_layout_get_context(layout.get()), options.get());
  pango_layout_context_changed(layout.get());
  return layout;
}

// One pass of `draw` on `surface`, over a white background.
void draw_on(cairo_surface_t* surface, int width, int height,
             const std::function<void(Painter&)>& draw, const std::string& path) {
  CairoPtr cr(cairo_create(surface));
  cairo_set_source_rgb(cr.get(), 1, 1, 1);
  cairo_rectangle(cr.get(), 0, 0, width, height);
  cairo_fill(cr.get());
  LayoutPtr layout = make_layout(cr.get());
  Painter painter(cr.get(), layout.get());
  draw(painter);
  check(cairo_status(cr.get()), path, "drawing");
}

void set_source(cairo_t* cr, Rgb c, double alpha) {
  cairo_set_source_rgba(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0, alpha);
}

}  // namespace

void Painter::fill_rect(double x, double y, double w, double h, Rgb c, double alpha) {
  set_source(cr_, c, alpha);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_fill(cr_);
}

void Painter::stroke_rect(double x, double y, double w, double h, Rgb c, double width) {
  set_source(cr_, c, 1);
  cairo_set_line_width(cr_, width);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_stroke(cr_);
}

void Painter::line(double x0, double y0, double x1, double y1, Rgb c, double width) {
  set_source(cr_, c, 1);
  cairo_set_line_width(cr_, width);
  cairo_move_to(cr_, x0, y0);
  cairo_line_to(cr_, x1, y1);
  cairo_stroke(cr_);
}

void Painter::circle(double x, double y, double radius, Rgb c) {
  set_source(cr_, c, 1);
  cairo_new_sub_path(cr_);
  cairo_arc(cr_, x, y, radius, 0, 2 * std::numbers::pi);
  cairo_fill(cr_);
}

void Painter::set_layout(const std::string& text, const TextStyle& style) {
  FontDescriptionPtr font(pango_font_description_from_string(kFontFamilies));
  pango_font_description_set_absolute_size(font.get(), style.size * PANGO_SCALE);
  pango_font_description_set_weight(font.get(),
                                    style.bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
  pango_layout_set_font_description(layout_, font.get());
  if (style.markup)
    pango_layout_set_markup(layout_, text.c_str(), -1);
  else
    pango_layout_set_text(layout_, text.c_str(), -1);
}

TextSize Painter::measure(const std::string& text, const TextStyle& style) {
  set_layout(text, style);
  PangoRectangle logical;
  pango_layout_get_extents(layout_, nullptr, &logical);
  return {static_cast<double>(logical.width) / PANGO_SCALE,
          static_cast<double>(logical.height) / PANGO_SCALE};
}

TextSize Painter::text(double x, double y, const std::string& text, const TextStyle& style,
                       Anchor h, Anchor v, double degrees) {
  const TextSize size = measure(text, style);
  auto offset = [](Anchor a, double extent) {
    return a == Anchor::kStart ? 0.0 : a == Anchor::kMiddle ? -extent / 2 : -extent;
  };
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  cairo_rotate(cr_, -degrees * std::numbers::pi / 180);
  cairo_move_to(cr_, offset(h, size.width), offset(v, size.height));
  set_source(cr_, style.color, 1);
  pango_cairo_update_layout(cr_, layout_);
  pango_cairo_show_layout(cr_, layout_);
  cairo_restore(cr_);
  return size;
}

void Painter::pixels(double x, double y, int rows, int cols, int scale,
                     const std::function<Rgb(int, int)>& pixel) {
  if (rows <= 0 || cols <= 0 || scale <= 0) return;
  SurfacePtr image(cairo_image_surface_create(CAIRO_FORMAT_RGB24, cols * scale, rows * scale));
  cairo_surface_flush(image.get());
  unsigned char* data = cairo_image_surface_get_data(image.get());
  const int stride = cairo_image_surface_get_stride(image.get());
  for (int i = 0; i < rows * scale; ++i) {
    auto* row = reinterpret_cast<uint32_t*>(data + static_cast<ptrdiff_t>(i) * stride);
    for (int j = 0; j < cols; ++j) {
      const Rgb c = pixel(i / scale, j);
      const uint32_t packed = (uint32_t{c.r} << 16) | (uint32_t{c.g} << 8) | uint32_t{c.b};
      for (int s = 0; s < scale; ++s) row[j * scale + s] = packed;
    }
  }
  cairo_surface_mark_dirty(image.get());
  cairo_save(cr_);
  cairo_set_source_surface(cr_, image.get(), std::round(x), std::round(y));
  cairo_pattern_set_filter(cairo_get_source(cr_), CAIRO_FILTER_NEAREST);
  cairo_rectangle(cr_, std::round(x), std::round(y), cols * scale, rows * scale);
  cairo_fill(cr_);
  cairo_restore(cr_);
}

TextSize measure_text(const std::string& text, const TextStyle& style) {
  require_fonts();
  // One small surface per thread, kept: layout passes measure many labels.
  struct Measurer {
    SurfacePtr surface{cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1)};
    CairoPtr cr{cairo_create(surface.get())};
    LayoutPtr layout = make_layout(cr.get());
  };
  thread_local Measurer m;
  return Painter(m.cr.get(), m.layout.get()).measure(text, style);
}

std::string svg_path(const std::string& png_path) {
  return std::filesystem::path(png_path).replace_extension(".svg").string();
}

double luminance(Rgb c) {
  auto linear = [](uint8_t v) {
    const double s = v / 255.0;
    return s <= 0.04045 ? s / 12.92 : std::pow((s + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * linear(c.r) + 0.7152 * linear(c.g) + 0.0722 * linear(c.b);
}

void render(const std::string& path, int width, int height,
            const std::function<void(Painter&)>& draw) {
  if (width < 1 || height < 1 || width > 16384 || height > 16384)
    throw ValueError(
        fmt::format("plot: {}: figure size {}x{} outside 1..16384 pixels", path, width, height));
  require_fonts();
  std::string png, svg;
  {
    SurfacePtr surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height));
    check(cairo_surface_status(surface.get()), path, "creating the image");
    draw_on(surface.get(), width, height, draw, path);
    check(cairo_surface_write_to_png_stream(surface.get(), append_bytes, &png), path,
          "PNG encoding");
  }
  {
    SurfacePtr surface(cairo_svg_surface_create_for_stream(append_bytes, &svg, width, height));
    check(cairo_surface_status(surface.get()), path, "creating the SVG");
    draw_on(surface.get(), width, height, draw, path);
    cairo_surface_finish(surface.get());
    check(cairo_surface_status(surface.get()), path, "SVG encoding");
  }
  for (const auto& [file, bytes] : {std::pair{path, &png}, std::pair{svg_path(path), &svg}}) {
    try {
      io::atomic_write(file, *bytes);
    } catch (const IOError& e) {
      throw IOError(fmt::format("plot: cannot write {}: {}", file, e.what()));
    }
  }
}

}  // namespace nabla::viz
