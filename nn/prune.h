// Pruning, after torch.nn.utils.prune (magnitude masks) and Michel et al. 2019, "Are Sixteen
// Heads Really Better than One?" (attention heads removed by importance).
//
// Masks. PyTorch renames `weight` to `weight_orig` and recomputes weight = weight_orig * mask in
// a forward pre-hook. nabla's modules read their parameter tensors directly, so here the
// parameter itself holds weight_orig * mask (pruned entries are set to exactly 0 in place), the
// mask is a persistent buffer `<name>_mask` on the owning module (PyTorch's state_dict name), and
// a gradient hook multiplies the parameter's gradient by the mask (PyTorch's weight_orig.grad).
// A pruned entry therefore gets a zero gradient; with SGD, Adam or AdamW whose state was made
// after pruning it stays exactly 0 (a zero weight decays to 0). An optimizer whose momentum
// predates the mask can move it: call reapply() after its steps. Checkpoints: state_dict()
// holds the masks; a fresh model needs restore_masks(dict) before load_state_dict(dict).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"
#include "nabla/nn/module.h"

namespace nabla::nn::prune {

// Parameters are named by their dotted path below `root` ("layers.0.linear1.weight").
// amount in [0, 1]: the fraction of the entries not yet pruned to prune now, rounded to the
// nearest count (PyTorch's float amount; pruning again prunes among the survivors).

// Prunes the entries of smallest |w| in one parameter.
void l1_unstructured(Module& root, const std::string& param, double amount);
// Prunes the entries of smallest |w| across all the parameters together, so layers end up with
// different sparsities.
void global_unstructured(Module& root, const std::vector<std::string>& params, double amount);
// Applies a given 0/1 mask (the parameter's shape and dtype); combined with an existing one.
void custom_from_mask(Module& root, const std::string& param, const Tensor& mask);

bool is_pruned(const Module& root, const std::string& param);
// Multiplies every pruned parameter by its mask again (in place).
void reapply(Module& root);
// Makes the pruning permanent: the zeros stay, the mask and its gradient masking go.
void remove(Module& root, const std::string& param);
// Registers the masks named in a pruned state_dict (keys ending in "_mask"), so that
// root.load_state_dict(dict) fits; returns how many.
int restore_masks(Module& root, const StateDict& dict);

// The weight matrices a magnitude sweep prunes: every parameter named "weight" or
// "*_proj_weight" with 2 dims (Linear, Conv kernels excluded by the dims test, attention
// projections); embeddings and norms are not included.
std::vector<std::string> linear_weights(const Module& root);
// Fraction of exact zeros (0 for an empty tensor).
double sparsity(const Tensor& t);

// --- attention heads (Michel et al. 2019, section 4) --------------------------------------------
// One gate per head of every MultiheadAttention below root, multiplying that head's part of the
// concatenated context before out_proj (a forward pre-hook). With requires_grad, the gates'
// gradients summed over data are the heads' importance: I_h = |sum dL/dgate_h|. The hooks go
// when the object does.
class HeadGates {
 public:
  explicit HeadGates(Module& root, bool requires_grad = true);
  ~HeadGates();
  HeadGates(const HeadGates&) = delete;
  HeadGates& operator=(const HeadGates&) = delete;

  size_t layers() const;
  const std::string& layer_name(size_t layer) const;  // the attention module's dotted path
  const Tensor& gate(size_t layer) const;             // (num_heads,)
  void set_gate(size_t layer, const std::vector<double>& values);
  // |accumulated gradient| per head, each layer divided by its L2 norm (Michel et al. 2019
  // normalise per layer); zeros when no gradient reached a layer.
  std::vector<std::vector<double>> importance() const;

 private:
  struct Layer;
  std::vector<std::shared_ptr<Layer>> layers_;
};

// Removes, in every MultiheadAttention below root (in named_modules order, as HeadGates), the
// heads_per_layer least important heads by `importance` (HeadGates::importance()); at least one
// head stays. Returns the removed head indices per layer.
std::vector<std::vector<int64_t>> prune_heads_by_importance(
    Module& root, const std::vector<std::vector<double>>& importance, int64_t heads_per_layer);

}  // namespace nabla::nn::prune
