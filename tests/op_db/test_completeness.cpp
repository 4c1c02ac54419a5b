// The op database covers every differentiable op nabla.h exports. The exported names are read
// from the headers, so a new op is caught without anyone remembering this file:
//   - every ops/*.h that nabla.h includes, and core/tensor.h: each namespace-scope declaration
//     (a line starting with its return type, as the project's format puts it) returning Tensor,
//     Tensor&, std::vector<Tensor>, ValuesIndices or MaxPoolResult;
//   - core/tensor.h's Tensor methods returning Tensor or Tensor& (views, conversions, ...).
// Operators (a + b, ...) forward inline to the named ops and are not listed. Everything found
// must have an entry in all_ops() or be in kNotOps below with its reason; every entry must name
// an exported function.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/op_db/op_db.h"

namespace {

// Exported, returning a tensor, but not a differentiable op.
const std::map<std::string, std::string> kNotOps = {
    // ops/compare.h: bool results carry no gradient.
    {"eq", "comparison (bool result)"},
    {"ne", "comparison (bool result)"},
    {"lt", "comparison (bool result)"},
    {"le", "comparison (bool result)"},
    {"gt", "comparison (bool result)"},
    {"ge", "comparison (bool result)"},
    {"logical_and", "logical op on bool tensors"},
    {"logical_or", "logical op on bool tensors"},
    {"logical_not", "logical op on bool tensors"},
    // ops/logical.h: bool results.
    {"any", "test on values (bool result)"},
    {"all", "test on values (bool result)"},
    {"isnan", "test on values (bool result)"},
    {"isfinite", "test on values (bool result)"},
    // ops/reduce_dim.h, ops/indexing.h: int64 results.
    {"argmax", "int64 positions"},
    {"argmin", "int64 positions"},
    {"one_hot", "int64 result from int64 indices"},
    {"nonzero", "int64 positions"},
    // ops/sort.h, ops/sampling.h: int64 positions and random draws.
    {"argsort", "int64 positions"},
    {"multinomial", "random int64 draws"},
    // ops/kernel_helpers.h: building blocks for a kernel, not ops (docs/custom-ops.md).
    {"map_unary", "kernel helper: runs a scalar function, records nothing"},
    {"map_float", "kernel helper: runs a scalar function, records nothing"},
    {"map_binary_numeric", "kernel helper: runs a scalar function, records nothing"},
    {"map_binary_float", "kernel helper: runs a scalar function, records nothing"},
    {"scalar_like", "kernel helper: a 0-d constant, records nothing"},
    // core/tensor.h: factories have no tensor input to differentiate.
    {"empty", "factory"},
    {"zeros", "factory"},
    {"ones", "factory"},
    {"full", "factory"},
    {"scalar_tensor", "factory"},
    {"zeros_like", "factory (uses only the shape and dtype)"},
    {"ones_like", "factory (uses only the shape and dtype)"},
    {"full_like", "factory (uses only the shape and dtype)"},
    {"empty_like", "factory (uses only the shape and dtype)"},
    {"arange", "factory"},
    {"linspace", "factory"},
    {"rand", "factory"},
    {"randn", "factory"},
    {"randint", "factory"},
    {"randn_like", "factory (uses only the shape and dtype)"},
    {"rand_like", "factory (uses only the shape and dtype)"},
    {"from_vector", "factory"},
    {"tensor", "factory"},
    // Tensor methods that are not recorded ops.
    {"fill_", "in-place fill, not recorded: refuses a tensor that requires grad"},
    {"zero_", "in-place fill, not recorded: refuses a tensor that requires grad"},
    {"copy_", "in-place copy, not recorded: refuses a tensor that requires grad"},
    {"requires_grad_", "autograd flag"},
    {"grad", "autograd accessor"},
    {"detach", "cuts the graph by definition"},
    {"data_view", "detach() for the engine's saved data: cuts the graph by definition"},
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kRoot = NABLA_SOURCE_DIR;

// Names declared at namespace scope (free functions) and in class Tensor, from a header's text.
void scan(const std::string& text, std::set<std::string>& names) {
  static const std::regex free_fn(
      R"(^(?:inline )?(?:Tensor|Tensor&|std::vector<Tensor>|ValuesIndices|MaxPoolResult) ([A-Za-z_]\w*)\()");
  static const std::regex method(R"(^  (?:Tensor|Tensor&) ([A-Za-z_]\w*)\()");
  std::istringstream in(text);
  bool in_tensor_class = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("class Tensor {", 0) == 0) in_tensor_class = true;
    if (in_tensor_class && line.rfind("};", 0) == 0) in_tensor_class = false;
    std::smatch m;
    if (std::regex_search(line, m, free_fn) ||
        (in_tensor_class && std::regex_search(line, m, method)))
      names.insert(m[1]);
  }
}

std::set<std::string> exported_names() {
  std::set<std::string> headers = {"core/tensor.h"};
  static const std::regex include(R"re(^#include "nabla/(ops/\w+\.h)")re");
  std::istringstream in(read(kRoot + "/nabla.h"));
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, include)) headers.insert(m[1]);
  }
  REQUIRE(headers.size() >= 15);  // the scan found nabla.h's ops headers
  std::set<std::string> names;
  for (const std::string& h : headers) scan(read(kRoot + "/" + h), names);
  return names;
}

// What the table lacks (missing), what it names that is not exported (stale), and kNotOps
// entries that are not exported or have an entry after all (needless_skip).
struct Coverage {
  std::vector<std::string> missing, stale, needless_skip;
};
Coverage coverage(const std::set<std::string>& exported, const std::set<std::string>& in_table,
                  const std::map<std::string, std::string>& not_ops) {
  Coverage c;
  for (const std::string& name : exported)
    if (!in_table.count(name) && !not_ops.count(name)) c.missing.push_back(name);
  for (const std::string& name : in_table)
    if (!exported.count(name)) c.stale.push_back(name);
  for (const auto& [name, reason] : not_ops)
    if (!exported.count(name) || in_table.count(name)) c.needless_skip.push_back(name);
  return c;
}

}  // namespace

// The completeness test can fail: each form of declaration is found, and a new op without an
// entry, a stale entry and a needless kNotOps name are each reported.
TEST_CASE("op_db completeness: the scan finds each kind of declaration", "[op_db][completeness]") {
  std::set<std::string> names;
  scan(R"(namespace nabla {
Tensor new_unary(const Tensor& x);
inline Tensor& new_inplace_(Tensor& x, double v) { return x; }
std::vector<Tensor> new_split(const Tensor& x, int64_t n);
ValuesIndices new_topk(const Tensor& x, int64_t k);
MaxPoolResult new_pool_with_indices(const Tensor& x, int64_t k);
Tensor operator+(const Tensor& a, const Tensor& b);
Shape not_an_op(const Shape& s);
  Tensor indented_free_function(const Tensor& x);
class Tensor {
 public:
  Tensor new_view(int64_t d) const;
  Tensor& new_method_(double v);
  int64_t dim() const;
};
}  // namespace nabla
)",
       names);
  CHECK(names == std::set<std::string>{"new_unary", "new_inplace_", "new_split", "new_topk",
                                       "new_pool_with_indices", "new_view", "new_method_"});
  const Coverage c =
      coverage({"a", "b", "factory"}, {"a", "gone"}, {{"factory", "why"}, {"x", "y"}});
  CHECK(c.missing == std::vector<std::string>{"b"});
  CHECK(c.stale == std::vector<std::string>{"gone"});
  CHECK(c.needless_skip == std::vector<std::string>{"x"});
}

TEST_CASE("op_db has an entry for every differentiable op nabla.h exports",
          "[op_db][completeness]") {
  const std::set<std::string> exported = exported_names();
  // The scan itself works: it finds ops of each kind of declaration.
  for (const char* known : {"add", "add_", "split", "max", "softmax", "view", "expand_as", "zeros"})
    REQUIRE(exported.count(known));

  std::set<std::string> in_table;
  for (const nabla::op_db::OpInfo& op : nabla::op_db::all_ops()) {
    INFO("duplicate entry " << op.name);
    CHECK(in_table.insert(op.name).second);
  }
  const Coverage c = coverage(exported, in_table, kNotOps);
  const auto& [missing, stale, needless_skip] = c;
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& n : v) s += " " + n;
    return s;
  };
  INFO("exported ops with no op_db entry (add one to tests/op_db, or to kNotOps with a reason):"
       << list(missing));
  CHECK(missing.empty());
  INFO("op_db entries that name no exported function:" << list(stale));
  CHECK(stale.empty());
  INFO("kNotOps names that are not exported, or that have an entry:" << list(needless_skip));
  CHECK(needless_skip.empty());
  CHECK(in_table.size() + kNotOps.size() == exported.size());
}
