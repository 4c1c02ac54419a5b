// PNG figures written by nabla itself (stb_image_write): line plots for loss curves and heatmaps
// for attention maps, with axis labels and titles rendered by stb_easy_font. Nobody needs
// Python to look at results. Files are written atomically.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nabla::viz {

struct Rgb {
  uint8_t r, g, b;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background = {255, 255, 255});
  int width() const { return w_; }
  int height() const { return h_; }
  void set(int x, int y, Rgb c);
  void fill_rect(int x0, int y0, int x1, int y1, Rgb c);  // inclusive-exclusive
  void line(double x0, double y0, double x1, double y1, Rgb c, int thickness = 1);
  // Text at (x, y) top-left; scale 1 = ~6 px glyphs. Returns the text width in pixels.
  int text(int x, int y, const std::string& s, Rgb c, int scale = 1);
  static int text_width(const std::string& s, int scale = 1);
  void save_png(const std::string& path) const;

 private:
  int w_, h_;
  std::vector<uint8_t> pixels_;
};

struct Series {
  std::string label;
  std::vector<double> x, y;
  Rgb color{31, 119, 180};
  bool markers = false;
  bool lines = true;
};

struct PlotOptions {
  std::string title, xlabel, ylabel;
  int width = 800, height = 500;
  bool log_x = false, log_y = false;
};

void line_plot(const std::string& path, const std::vector<Series>& series, const PlotOptions& opts);

// A (rows x cols) matrix as a heatmap (viridis-like colour map, min..max of the data), with
// optional row/column labels.
void heatmap(const std::string& path, const std::vector<std::vector<double>>& values,
             const std::string& title, const std::vector<std::string>& row_labels = {},
             const std::vector<std::string>& col_labels = {}, int cell = 0);

// A grid of grayscale images (each rows x cols in [0, 1]) with an optional colour overlay
// (alpha-blended heat, same size) and captions; used for ViT attention maps.
void image_grid(const std::string& path, const std::vector<std::vector<double>>& images, int rows,
                int cols, const std::vector<std::vector<double>>& overlays,
                const std::vector<std::string>& captions, int scale = 6);

// Attention over image patches drawn on the images (a ViT's CLS attention): each image's
// (grid_rows x grid_cols) map, min-max scaled per image and spread over its patch's pixels, is
// blended over the image; the same images follow plain. One strip, each caption under both copies.
struct PatchAttention {
  int rows = 0, cols = 0;             // image size in pixels
  int grid_rows = 0, grid_cols = 0;   // patches down and across; they divide rows and cols
  std::vector<float> images;          // (n, rows, cols), values in [0, 1]
  std::vector<float> maps;            // (n, grid_rows, grid_cols)
  std::vector<std::string> captions;  // n
};
void patch_attention_strip(const std::string& path, const PatchAttention& a, int scale = 6);

// A row-major (rows x cols) buffer as the nested rows heatmap() takes.
template <class T>
std::vector<std::vector<double>> matrix_rows(const std::vector<T>& flat, size_t rows, size_t cols) {
  std::vector<std::vector<double>> out(rows);
  for (size_t i = 0; i < rows; ++i)
    out[i].assign(flat.begin() + static_cast<std::ptrdiff_t>(i * cols),
                  flat.begin() + static_cast<std::ptrdiff_t>((i + 1) * cols));
  return out;
}

Rgb colormap(double t);  // t in [0, 1]
inline constexpr Rgb kPalette[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},
                                   {214, 39, 40},  {148, 103, 189}, {140, 86, 75}};

}  // namespace nabla::viz
