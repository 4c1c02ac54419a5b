// The example figures' axis ticks and labels (examples/common/ticks.h): exact lists.
#include "examples/common/ticks.h"

#include <cmath>

#include "examples/common/plot.h"
#include "tests/helpers.h"

using namespace nabla;
using namespace nabla::viz;
using Catch::Matchers::Contains;
using V = std::vector<double>;
using S = std::vector<std::string>;

TEST_CASE("nice_ticks: steps of 1, 2 or 5 x 10^k, exact decimals", "[plot][ticks]") {
  CHECK(nice_ticks(0, 1, 6) == V{0, 0.2, 0.4, 0.6, 0.8, 1});
  CHECK(nice_ticks(0, 1, 11) == V{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1});
  CHECK(nice_ticks(0, 1, 3) == V{0, 0.5, 1});
  CHECK(nice_ticks(0, 100, 5) == V{0, 50, 100});
  CHECK(nice_ticks(1, 0, 6) == nice_ticks(0, 1, 6));  // order of the bounds does not matter
}

TEST_CASE("nice_ticks: the range of the old plots, no -0.107 / 0.365 / 0.838", "[plot][ticks]") {
  const V ticks = nice_ticks(-0.107, 0.838, 6);
  CHECK(ticks == V{0, 0.2, 0.4, 0.6, 0.8});
  CHECK(!std::signbit(ticks[0]));  // +0, so its label is "0.0", not "-0.0"
  CHECK(nice_ticks(-1.3, 2.9, 6) == V{-1, 0, 1, 2});
}

TEST_CASE("nice_ticks: tiny, huge and negative ranges", "[plot][ticks]") {
  CHECK(nice_ticks(1e-7, 5e-7, 5) == V{1e-7, 2e-7, 3e-7, 4e-7, 5e-7});
  CHECK(nice_ticks(0.00012, 0.00019, 5) == V{0.00012, 0.00014, 0.00016, 0.00018});
  CHECK(nice_ticks(0, 3.2e9, 6) == V{0, 1e9, 2e9, 3e9});
  CHECK(nice_ticks(1e20, 5e20, 5) == V{1e20, 2e20, 3e20, 4e20, 5e20});
  CHECK(nice_ticks(-37, -3, 8) == V{-35, -30, -25, -20, -15, -10, -5});
  CHECK(nice_ticks(-1e-3, 1e-3, 5) == V{-1e-3, -5e-4, 0, 5e-4, 1e-3});
}

TEST_CASE("nice_ticks: a single value is widened by 10% (by 1 around 0)", "[plot][ticks]") {
  CHECK(nice_ticks(5, 5, 6) == V{4.6, 4.8, 5, 5.2, 5.4});
  CHECK(nice_ticks(0, 0, 5) == V{-1, -0.5, 0, 0.5, 1});
  CHECK(nice_ticks(-2e-9, -2e-9, 5) == V{-2.2e-9, -2.1e-9, -2e-9, -1.9e-9, -1.8e-9});
  CHECK(axis_limits(3, 3, 0.05, false) == std::pair{2.7, 3.3});
  CHECK(axis_limits(10, 10, 0.05, true) == std::pair{1.0, 100.0});
}

TEST_CASE("nice_ticks: never more than max_ticks, bad input refused", "[plot][ticks]") {
  for (int max_ticks = 2; max_ticks <= 12; ++max_ticks)
    for (double hi : {0.7, 1.0, 3.3, 47.0, 999.0, 1.2e6}) {
      INFO("max_ticks " << max_ticks << " hi " << hi);
      const V t = nice_ticks(-0.3, hi, max_ticks);
      CHECK(t.size() <= static_cast<size_t>(max_ticks));
      CHECK(t.front() >= -0.3);
      CHECK(t.back() <= hi);
    }
  CHECK_THROWS_AS(nice_ticks(0, NAN, 5), ValueError);
  CHECK_THROWS_WITH(nice_ticks(0, INFINITY, 5), Contains("nice_ticks") && Contains("finite"));
  CHECK_THROWS_WITH(nice_ticks(0, 1, 1), Contains("max_ticks"));
  CHECK_THROWS_AS(axis_limits(0, 1, 0.05, true), ValueError);
}

TEST_CASE("log_ticks: decades, thinned; 1-2-5 inside one decade", "[plot][ticks]") {
  CHECK(log_ticks(1, 1000, 8) == V{1, 10, 100, 1000});
  CHECK(log_ticks(2, 1024, 8) == V{10, 100, 1000});
  CHECK(log_ticks(1e-6, 1e6, 5) == V{1e-6, 1e-3, 1, 1e3, 1e6});
  CHECK(log_ticks(1e-12, 1e-9, 8) == V{1e-12, 1e-11, 1e-10, 1e-9});
  CHECK(log_ticks(3, 40, 8) == V{5, 10, 20});
  CHECK(log_ticks(0.011, 0.6, 8) == V{0.02, 0.05, 0.1, 0.2, 0.5});
  CHECK(log_ticks(3, 4.5, 6) == V{3, 3.5, 4, 4.5});  // no 1, 2 or 5 inside: linear steps
  CHECK_THROWS_WITH(log_ticks(0, 10, 5), Contains("log_ticks") && Contains("> 0"));
  CHECK_THROWS_AS(log_ticks(-1, 10, 5), ValueError);
}

TEST_CASE("tick labels share their decimals, or a power of ten", "[plot][ticks]") {
  TickLabels l = linear_tick_labels({0, 0.2, 0.4, 0.6, 0.8});
  CHECK(l.labels == S{"0.0", "0.2", "0.4", "0.6", "0.8"});
  CHECK(l.multiplier.empty());
  CHECK(linear_tick_labels({-35, -30, -25}).labels == S{"\u221235", "\u221230", "\u221225"});
  CHECK(linear_tick_labels({0, 2500, 5000}).labels == S{"0", "2500", "5000"});
  l = linear_tick_labels({0, 1e9, 2e9, 3e9});
  CHECK(l.labels == S{"0", "1", "2", "3"});
  CHECK(l.multiplier == "\u00d710<sup>9</sup>");
  l = linear_tick_labels({0, 5e-5, 1e-4, 1.5e-4});
  CHECK(l.labels == S{"0.0", "0.5", "1.0", "1.5"});
  CHECK(l.multiplier == "\u00d710<sup>\u22124</sup>");
  CHECK(log_tick_labels({1e-6, 1e-3, 1, 1e3, 1e6}) ==
        S{"10<sup>\u22126</sup>", "0.001", "1", "1000", "10<sup>6</sup>"});
  CHECK(log_tick_labels({0.02, 5, 2e7}) == S{"0.02", "5", "2\u00d710<sup>7</sup>"});
}

TEST_CASE("heatmap cell values and the colour map", "[plot][ticks]") {
  CHECK(format_value(3, true) == "3");
  CHECK(format_value(1234, true) == "1234");
  CHECK(format_value(0.934, false) == "0.93");
  CHECK(format_value(42.46, false) == "42.5");
  CHECK(format_value(-0.5, false) == "\u22120.50");
  CHECK(colormap(0).r == 68);
  CHECK(colormap(1).g == 231);
  CHECK(colormap(0.5).g == 145);
  CHECK(colormap(NAN).b == colormap(0).b);
  CHECK(luminance({255, 255, 255}) == Approx(1.0));
  CHECK(luminance(colormap(0)) < 0.179);  // text on the darkest cell is white
  CHECK(luminance(colormap(1)) > 0.179);  // and black on the brightest
}

TEST_CASE("running_mean: a centred window, shorter at the ends, NaN left out", "[plot][ticks]") {
  CHECK(running_mean({1, 2, 3, 4, 5}, 3) == V{1.5, 2, 3, 4, 4.5});
  CHECK(running_mean({1, 2, 3}, 1) == V{1, 2, 3});
  CHECK(running_mean({1, NAN, 3, 5}, 3) == V{1, 2, 4, 4});
  CHECK(std::isnan(running_mean({NAN}, 3)[0]));
  CHECK_THROWS_WITH(running_mean({1}, 0), Contains("window"));
}
