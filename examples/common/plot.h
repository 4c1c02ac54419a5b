// The example programs' figures, written by nabla itself so nobody needs Python to look at
// results: line plots (loss curves, fits; log axes), heatmaps (attention maps, confusion
// matrices; values written in the cells), image grids (dataset samples) and attention over image
// patches. Each figure is path.png plus path.svg from the same drawing code (draw.h: Cairo +
// Pango); ticks are 1, 2, 5 x 10^k (ticks.h). Bad input throws ValueError, an unwritable path
// IOError.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "examples/common/draw.h"

namespace nabla::viz {

// The tab10 colours of matplotlib (and of d3's category10).
inline constexpr Rgb kPalette[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},
                                   {214, 39, 40},  {148, 103, 189}, {140, 86, 75}};

struct Series {
  std::string label{};  // its legend entry; empty: not in the legend
  std::vector<double> x{}, y{};
  Rgb color{31, 119, 180};
  bool markers = false;
  bool lines = true;
  double width = 2;  // line width in pixels
  double alpha = 1;  // line opacity: a faint raw curve under its smoothed one
};

struct PlotOptions {
  std::string title{}, xlabel{}, ylabel{};
  int width = 800, height = 500;
  bool log_x = false, log_y = false;  // points <= 0 are left out on a log axis
};

// Series on shared axes, with a legend in the corner that hides the fewest points. Non-finite
// points are skipped and break a line.
void line_plot(const std::string& path, const std::vector<Series>& series, const PlotOptions& opts);

enum class Annotate { kAuto, kAlways, kNever };

struct HeatmapOptions {
  std::string title{};
  std::string xlabel{}, ylabel{};  // under the column labels; beside the row labels
  std::vector<std::string> row_labels{}, col_labels{};  // empty, or one per row / column
  int cell = 0;  // pixels per cell; 0: the larger side near 560 px, cells of 8 to 56 px
  Annotate annotate = Annotate::kAuto;  // each cell's value in it; kAuto: when it fits
};

// A (rows x cols) matrix in viridis over its min..max, with a colour bar. Column labels too wide
// for their cells are drawn at 45 degrees.
void heatmap(const std::string& path, const std::vector<std::vector<double>>& values,
             const HeatmapOptions& opts);

struct ImageGrid {
  int rows = 0, cols = 0;                     // every image's size in pixels
  std::vector<std::vector<double>> images{};  // each rows * cols grey values in [0, 1]
  // None, or one per image (empty: none for that image): [0, 1] heat in viridis drawn over it.
  std::vector<std::vector<double>> overlays{};
  std::vector<std::string> captions{};  // none, or one per image (may be empty strings)
  int per_row = 0;                      // images per line; 0: all on one line
  int scale = 4;                        // screen pixels per image pixel
  int patch = 0;                        // > 0: patch borders every `patch` pixels on overlays
  std::string title{};
  std::vector<std::string> line_titles{};  // none, or one per line, written down its left side
};
void image_grid(const std::string& path, const ImageGrid& grid);

// Attention over image patches (a ViT's CLS attention): each image's (grid_rows x grid_cols)
// map, min-max scaled per image, drawn over its patches; under it the same image plain, then
// the caption.
struct PatchAttention {
  int rows = 0, cols = 0;               // image size in pixels
  int grid_rows = 0, grid_cols = 0;     // patches down and across; they divide rows and cols
  std::vector<float> images{};          // (n, rows, cols), values in [0, 1]
  std::vector<float> maps{};            // (n, grid_rows, grid_cols)
  std::vector<std::string> captions{};  // n
  std::string title{};
};
void patch_attention_strip(const std::string& path, const PatchAttention& a, int scale = 6);

// Each value replaced by the mean of the `window` values centred on it (fewer at the ends;
// non-finite ones left out): a smoothed curve without an exponential average's lag.
std::vector<double> running_mean(const std::vector<double>& values, int window);

// A row-major (rows x cols) buffer as the nested rows heatmap() takes.
template <class T>
std::vector<std::vector<double>> matrix_rows(const std::vector<T>& flat, size_t rows, size_t cols) {
  std::vector<std::vector<double>> out(rows);
  for (size_t i = 0; i < rows; ++i)
    out[i].assign(flat.begin() + static_cast<std::ptrdiff_t>(i * cols),
                  flat.begin() + static_cast<std::ptrdiff_t>((i + 1) * cols));
  return out;
}

// matplotlib's viridis (perceptually uniform; van der Walt and Smith, CC0) at t in [0, 1].
Rgb colormap(double t);

}  // namespace nabla::viz
