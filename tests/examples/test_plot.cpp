// The example figures written to disk (examples/common/plot.h): a PNG of the asked size (read
// back through Cairo), an SVG beside it that parses as XML, clear errors for bad input and
// unwritable paths.
#include "examples/common/plot.h"

#include <cairo.h>
#include <expat.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "examples/common/training.h"
#include "tests/helpers.h"

using namespace nabla;
using namespace nabla::viz;
using Catch::Matchers::Contains;

namespace {

// A fresh directory per test process (ctest runs the test cases in parallel processes), removed
// at exit. NABLA_KEEP_PLOTS=1 keeps it, to look at the figures.
struct TempDir {
  std::string path =
      (std::filesystem::temp_directory_path() / ("nabla_plot_" + std::to_string(::getpid())))
          .string();
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    if (!std::getenv("NABLA_KEEP_PLOTS")) std::filesystem::remove_all(path);
  }
};

std::string out_dir() {
  static const TempDir dir;
  return dir.path;
}

struct Png {
  int width = 0, height = 0;
  std::vector<uint32_t> pixels;  // 0x00RRGGBB
  size_t count(Rgb c) const {
    const uint32_t want = (uint32_t{c.r} << 16) | (uint32_t{c.g} << 8) | c.b;
    size_t n = 0;
    for (uint32_t p : pixels) n += (p & 0xffffff) == want;
    return n;
  }
};

Png read_png(const std::string& path) {
  std::unique_ptr<cairo_surface_t, void (*)(cairo_surface_t*)> s(
      cairo_image_surface_create_from_png(path.c_str()), cairo_surface_destroy);
  REQUIRE(cairo_surface_status(s.get()) == CAIRO_STATUS_SUCCESS);
  Png png{cairo_image_surface_get_width(s.get()), cairo_image_surface_get_height(s.get()), {}};
  const unsigned char* data = cairo_image_surface_get_data(s.get());
  const int stride = cairo_image_surface_get_stride(s.get());
  for (int y = 0; y < png.height; ++y)
    for (int x = 0; x < png.width; ++x)
      png.pixels.push_back(reinterpret_cast<const uint32_t*>(data + y * stride)[x]);
  return png;
}

// Parses the file with expat; returns the root element's name, or the parser's error.
std::string xml_root(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string xml = text.str();
  std::unique_ptr<XML_ParserStruct, void (*)(XML_Parser)> parser(XML_ParserCreate(nullptr),
                                                                 XML_ParserFree);
  std::string root;
  XML_SetUserData(parser.get(), &root);
  XML_SetStartElementHandler(parser.get(), [](void* data, const XML_Char* name, const XML_Char**) {
    auto* r = static_cast<std::string*>(data);
    if (r->empty()) *r = name;
  });
  if (XML_Parse(parser.get(), xml.data(), static_cast<int>(xml.size()), 1) != XML_STATUS_OK)
    return fmt::format("XML error at line {}: {}", XML_GetCurrentLineNumber(parser.get()),
                       XML_ErrorString(XML_GetErrorCode(parser.get())));
  return root;
}

}  // namespace

TEST_CASE("line_plot writes a PNG of the asked size and an SVG beside it", "[plot]") {
  const std::string path = out_dir() + "/curves.png";
  std::vector<double> x, train, valid;
  for (int i = 1; i <= 200; ++i) {
    x.push_back(i);
    train.push_back(2.0 / i + 0.1);
    valid.push_back(2.5 / i + 0.2);
  }
  line_plot(path,
            {{"train", x, train, kPalette[0]}, {"validation", x, valid, kPalette[3], true, false}},
            {"loss", "step", "cross-entropy", 640, 400});
  const Png png = read_png(path);
  CHECK(png.width == 640);
  CHECK(png.height == 400);
  CHECK(png.count(kPalette[3]) > 50);  // the validation markers are drawn, in their colour
  CHECK(png.count(kWhite) > 640 * 400 / 2);
  CHECK(xml_root(svg_path(path)) == "svg");
}

TEST_CASE("line_plot: log axes, a single point, empty and non-finite series", "[plot]") {
  const std::string path = out_dir() + "/log.png";
  line_plot(path, {{"a", {1, 10, 100, 1000}, {1e-6, 1e-4, NAN, 1}, kPalette[1], true}},
            {.title = "log", .width = 500, .height = 300, .log_x = true, .log_y = true});
  CHECK(read_png(path).width == 500);
  CHECK(xml_root(svg_path(path)) == "svg");
  line_plot(path, {{"one", {3}, {3}, kPalette[0], true}}, {"one point"});
  CHECK(read_png(path).height == 500);
  line_plot(path, {}, {"nothing"});
  CHECK(read_png(path).width == 800);
}

TEST_CASE("line_plot refuses mismatched series and sizes too small to plot", "[plot]") {
  const std::string path = out_dir() + "/bad.png";
  CHECK_THROWS_WITH(line_plot(path, {{"s", {1, 2, 3}, {1, 2}}}, {}),
                    Contains("line_plot") && Contains("\"s\"") && Contains("3 x but 2 y"));
  CHECK_THROWS_WITH(line_plot(path, {{"s", {1, 2}, {1, 2}}}, {"t", "x", "y", 60, 40}),
                    Contains("no room"));
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("an unwritable path is a clear IOError", "[plot]") {
  const std::string missing_dir = out_dir() + "/no/such/dir/fig.png";
  CHECK_THROWS_AS(line_plot(missing_dir, {{"s", {1, 2}, {1, 2}}}, {}), IOError);
  CHECK_THROWS_WITH(heatmap(missing_dir, {{1, 2}, {3, 4}}, {}),
                    Contains("plot: cannot write") && Contains(missing_dir));
  const std::string file_as_dir = out_dir() + "/a_file";
  std::ofstream(file_as_dir) << "x";
  CHECK_THROWS_AS(image_grid(file_as_dir + "/fig.png", {.rows = 1, .cols = 1, .images = {{0.5}}}),
                  IOError);
}

TEST_CASE("heatmap: cells in viridis, values written in them, labels", "[plot]") {
  const std::string path = out_dir() + "/confusion.png";
  const std::vector<std::string> names = {"T-shirt", "Trouser", "Pullover"};
  heatmap(path, {{50, 2, 0}, {1, 47, 3}, {9, 0, 40}},
          {.title = "confusion",
           .xlabel = "predicted",
           .ylabel = "true",
           .row_labels = names,
           .col_labels = names});
  const Png png = read_png(path);
  CHECK(png.width > 3 * 56);
  CHECK(png.height > 3 * 56);
  CHECK(png.count(colormap(0)) > 56 * 56);  // the 0 cells: most of each cell is its colour
  CHECK(png.count(colormap(1)) > 56 * 56 / 2);
  CHECK(png.count(kWhite) > 1000);
  CHECK(xml_root(svg_path(path)) == "svg");
  // Without the text the cells are exactly their colour (and so is the colour bar's top row).
  heatmap(path, {{0, 1}, {1, 0}}, {.cell = 20, .annotate = Annotate::kNever});
  CHECK(read_png(path).count(colormap(1)) == 2 * 20 * 20 + 16);
}

TEST_CASE("heatmap refuses ragged rows and wrong label counts", "[plot]") {
  const std::string path = out_dir() + "/bad.png";
  CHECK_THROWS_WITH(heatmap(path, {{1, 2}, {3}}, {}), Contains("row 1 has 1 values"));
  CHECK_THROWS_WITH(heatmap(path, {}, {}), Contains("empty"));
  CHECK_THROWS_WITH(heatmap(path, {{1, 2}}, {.col_labels = {"a"}}),
                    Contains("1 column labels for 2 columns"));
}

TEST_CASE("image_grid and patch_attention_strip draw images pixel for pixel", "[plot]") {
  const std::string path = out_dir() + "/grid.png";
  ImageGrid grid{.rows = 4, .cols = 4, .per_row = 2, .scale = 5, .title = "samples"};
  for (int k = 0; k < 3; ++k) {
    grid.images.emplace_back(16, k == 1 ? 1.0 : 0.0);
    grid.captions.push_back(k == 1 ? "white" : "black");
  }
  image_grid(path, grid);
  const Png png = read_png(path);
  CHECK(png.count({0, 0, 0}) == 2 * 20 * 20);  // two black 4x4 images at 5x
  CHECK(xml_root(svg_path(path)) == "svg");
  grid.captions.pop_back();
  CHECK_THROWS_WITH(image_grid(path, grid), Contains("3 images but 0 overlays and 2 captions"));

  PatchAttention a{.rows = 4, .cols = 4, .grid_rows = 2, .grid_cols = 2};
  a.images.assign(2 * 16, 0.5f);
  a.maps = {1, 0, 0, 0, 0, 0, 0, 2};
  a.captions = {"a", "b"};
  patch_attention_strip(path, a, 3);
  CHECK(xml_root(svg_path(path)) == "svg");
  a.maps.pop_back();
  CHECK_THROWS_WITH(patch_attention_strip(path, a), Contains("7 map values"));
}

TEST_CASE("LossCurve draws train and validation loss on one chart", "[plot]") {
  examples::LossCurve curve;
  for (int step = 1; step <= 100; ++step) curve.add(step, 3.0 / step);
  curve.add_validation(50, 0.2, "test loss");
  curve.add_validation(100, 0.1, "test loss");
  const std::string path = out_dir() + "/loss.png";
  curve.plot(path, "loss", "cross-entropy");
  CHECK(read_png(path).count(kPalette[1]) > 20);  // the validation points
  CHECK(xml_root(svg_path(path)) == "svg");
}

// Run by ctest with FONTCONFIG_FILE naming a configuration without fonts (tests/CMakeLists.txt).
TEST_CASE("no font installed: a clear IOError, not a figure without text", "[.no-font]") {
  CHECK_THROWS_WITH(line_plot(out_dir() + "/nofont.png", {}, {}),
                    Contains("no fonts") && Contains("fonts-dejavu-core"));
}
