// Tests of LSTM, GRU and RNN against a step-by-step reference written from
// the ONNX equations: every direction, sequence lengths, initial states,
// peepholes, activations with alpha/beta, clip, linear_before_reset, the
// batch-major layout, omitted outputs, inference, errors and the upgrader.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "graph/exec/executor.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/shape_inference.h"

namespace kiln {
namespace {

Type TypeOf(const Tensor& t) {
  DimVector d(t.dims().begin(), t.dims().end());
  return Type::Tensor(t.dtype(), Shape(std::move(d)));
}
std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.GetDouble(i)));
  return v;
}
Tensor Ramp(Dims dims, float scale, float phase, float amp = 0.5f) {
  Tensor t(DType::kF32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = amp * std::sin(static_cast<float>(i) * scale + phase);
  return t;
}
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

enum class Cell { kLstm, kGru, kRnn };

struct Config {
  Cell cell = Cell::kLstm;
  std::string direction = "forward";
  int64_t T = 4, B = 3, I = 2, H = 3;
  bool bias = true, seq_lens = false, init_h = false, init_c = false, peep = false;
  std::vector<std::string> acts;
  std::vector<float> alphas, betas;
  float clip = 0;
  bool lbr = false;
  bool input_forget = false;
};

int Gates(Cell c) { return c == Cell::kLstm ? 4 : c == Cell::kGru ? 3 : 1; }

using Fn = std::function<double(double)>;
Fn MakeFn(const std::string& name, float a, float b) {
  if (name == "Sigmoid") return [](double x) { return 1 / (1 + std::exp(-x)); };
  if (name == "Tanh") return [](double x) { return std::tanh(x); };
  if (name == "Relu") return [](double x) { return std::max(0.0, x); };
  if (name == "HardSigmoid") return [a, b](double x) { return std::max(0.0, std::min(1.0, a * x + b)); };
  if (name == "LeakyRelu") return [a](double x) { return x < 0 ? a * x : x; };
  if (name == "ScaledTanh") return [a, b](double x) { return a * std::tanh(b * x); };
  if (name == "Affine") return [a, b](double x) { return a * x + b; };
  if (name == "Elu") return [a](double x) { return x < 0 ? a * (std::exp(x) - 1) : x; };
  if (name == "Softsign") return [](double x) { return x / (1 + std::abs(x)); };
  if (name == "Softplus") return [](double x) { return std::log(1 + std::exp(x)); };
  if (name == "ThresholdedRelu") return [a](double x) { return x > a ? x : 0; };
  return nullptr;
}

struct Inputs {
  Tensor X, W, R, B, L, H0, C0, P;
};

Inputs MakeInputs(const Config& c) {
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, G = Gates(c.cell);
  Inputs in;
  in.X = Ramp({c.T, c.B, c.I}, 0.71f, 0.1f, 1.0f);
  in.W = Ramp({D, G * c.H, c.I}, 0.37f, 0.3f);
  in.R = Ramp({D, G * c.H, c.H}, 0.53f, 0.7f);
  in.B = Ramp({D, 2 * G * c.H}, 0.29f, 1.1f, 0.3f);
  std::vector<int32_t> lens;
  for (int64_t b = 0; b < c.B; ++b) lens.push_back(static_cast<int32_t>(std::max<int64_t>(0, c.T - b)));
  in.L = Tensor::FromVector<int32_t>(lens, {c.B});
  in.H0 = Ramp({D, c.B, c.H}, 0.41f, 0.2f);
  in.C0 = Ramp({D, c.B, c.H}, 0.31f, 0.9f);
  in.P = Ramp({D, 3 * c.H}, 0.61f, 0.4f);
  return in;
}

// Reference: outputs Y [T, D, B, H], Y_h [D, B, H], Y_c [D, B, H].
std::vector<std::vector<float>> Reference(const Config& c, const Inputs& in) {
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, G = Gates(c.cell), T = c.T, B = c.B, I = c.I, H = c.H;
  const int per = c.cell == Cell::kLstm ? 3 : c.cell == Cell::kGru ? 2 : 1;
  std::vector<std::string> names = c.acts;
  if (names.empty()) {
    for (int64_t d = 0; d < D; ++d) {
      if (c.cell == Cell::kLstm) names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
      else if (c.cell == Cell::kGru) names.insert(names.end(), {"Sigmoid", "Tanh"});
      else names.push_back("Tanh");
    }
  }
  std::vector<Fn> fns;
  size_t ai = 0, bi = 0;
  for (const std::string& n : names) {
    float a = 0, b = 0;
    if (n == "HardSigmoid" || n == "ScaledTanh" || n == "Affine") {
      a = c.alphas[ai++];
      b = c.betas[bi++];
    } else if (n == "LeakyRelu" || n == "Elu" || n == "ThresholdedRelu") {
      a = c.alphas[ai++];
    }
    fns.push_back(MakeFn(n, a, b));
  }
  auto X = Floats(in.X), W = Floats(in.W), R = Floats(in.R), Bv = Floats(in.B);
  auto H0 = Floats(in.H0), C0 = Floats(in.C0), P = Floats(in.P);
  std::vector<float> Y(T * D * B * H, 0.f), YH(D * B * H), YC(D * B * H);
  auto clip = [&](double v) { return c.clip > 0 ? std::max<double>(-c.clip, std::min<double>(c.clip, v)) : v; };
  for (int64_t d = 0; d < D; ++d) {
    bool rev = c.direction == "reverse" || d == 1;
    const Fn* f = &fns[d * per];
    for (int64_t b = 0; b < B; ++b) {
      int64_t len = c.seq_lens ? std::max<int64_t>(0, T - b) : T;
      std::vector<double> h(H), cs(H);
      for (int64_t k = 0; k < H; ++k) {
        h[k] = c.init_h ? H0[(d * B + b) * H + k] : 0;
        cs[k] = c.init_c ? C0[(d * B + b) * H + k] : 0;
      }
      for (int64_t s = 0; s < len; ++s) {
        int64_t t = rev ? len - 1 - s : s;
        // wx[g] = W x + Wb, rh[g] = R h + Rb for every gate row g.
        std::vector<double> wx(G * H), rh(G * H);
        for (int64_t g = 0; g < G * H; ++g) {
          double a = c.bias ? Bv[d * 2 * G * H + g] : 0, r = c.bias ? Bv[d * 2 * G * H + G * H + g] : 0;
          for (int64_t i = 0; i < I; ++i) a += W[(d * G * H + g) * I + i] * X[(t * B + b) * I + i];
          for (int64_t i = 0; i < H; ++i) r += R[(d * G * H + g) * H + i] * h[i];
          wx[g] = a;
          rh[g] = r;
        }
        std::vector<double> hn(H), cn(H);
        if (c.cell == Cell::kLstm) {
          for (int64_t k = 0; k < H; ++k) {
            double pi = c.peep ? P[d * 3 * H + k] : 0, po = c.peep ? P[d * 3 * H + H + k] : 0,
                   pf = c.peep ? P[d * 3 * H + 2 * H + k] : 0;
            double ig = f[0](clip(wx[k] + rh[k] + pi * cs[k]));
            double fg = c.input_forget ? 1 - ig : f[0](clip(wx[2 * H + k] + rh[2 * H + k] + pf * cs[k]));
            double cg = f[1](clip(wx[3 * H + k] + rh[3 * H + k]));
            cn[k] = fg * cs[k] + ig * cg;
            double og = f[0](clip(wx[H + k] + rh[H + k] + po * cn[k]));
            hn[k] = og * f[2](cn[k]);
          }
        } else if (c.cell == Cell::kGru) {
          std::vector<double> z(H), r(H);
          for (int64_t k = 0; k < H; ++k) {
            z[k] = f[0](clip(wx[k] + rh[k]));
            r[k] = f[0](clip(wx[H + k] + rh[H + k]));
          }
          for (int64_t k = 0; k < H; ++k) {
            double pre;
            if (c.lbr) {
              pre = wx[2 * H + k] + r[k] * rh[2 * H + k];
            } else {
              double acc = c.bias ? Bv[d * 2 * G * H + G * H + 2 * H + k] : 0;
              for (int64_t i = 0; i < H; ++i) acc += R[(d * G * H + 2 * H + k) * H + i] * r[i] * h[i];
              pre = wx[2 * H + k] + acc;
            }
            double hh = f[1](clip(pre));
            hn[k] = (1 - z[k]) * hh + z[k] * h[k];
          }
        } else {
          for (int64_t k = 0; k < H; ++k) hn[k] = f[0](clip(wx[k] + rh[k]));
        }
        h = hn;
        cs = cn;
        for (int64_t k = 0; k < H; ++k) Y[((t * D + d) * B + b) * H + k] = static_cast<float>(h[k]);
      }
      for (int64_t k = 0; k < H; ++k) {
        YH[(d * B + b) * H + k] = static_cast<float>(h[k]);
        YC[(d * B + b) * H + k] = static_cast<float>(cs[k]);
      }
    }
  }
  return {Y, YH, YC};
}

const char* OpName(Cell c) { return c == Cell::kLstm ? "LSTM" : c == Cell::kGru ? "GRU" : "RNN"; }

// Builds the node with run-time inputs (omitted ones null) and runs it.
absl::StatusOr<std::vector<Tensor>> RunCell(const Config& c, const Inputs& in, int64_t layout = 0,
                                            int outputs = -1) {
  Graph g;
  std::vector<Tensor> feeds;
  auto add = [&](const Tensor& t) {
    feeds.push_back(t);
    return g.AddInput(g.UniqueName("in"), TypeOf(t));
  };
  auto bt = [](const Tensor& t) {  // [a, b, c] -> [b, a, c]
    Tensor o(t.dtype(), {t.dim(1), t.dim(0), t.dim(2)});
    for (int64_t i = 0; i < t.dim(0); ++i)
      for (int64_t j = 0; j < t.dim(1); ++j)
        for (int64_t k = 0; k < t.dim(2); ++k)
          o.data<float>()[(j * t.dim(0) + i) * t.dim(2) + k] = t.data<float>()[(i * t.dim(1) + j) * t.dim(2) + k];
    return o;
  };
  std::vector<Value*> ins = {add(layout ? bt(in.X) : in.X), add(in.W), add(in.R)};
  ins.push_back(c.bias ? add(in.B) : nullptr);
  ins.push_back(c.seq_lens ? add(in.L) : nullptr);
  ins.push_back(c.init_h ? add(layout ? bt(in.H0) : in.H0) : nullptr);
  if (c.cell == Cell::kLstm) {
    ins.push_back(c.init_c ? add(layout ? bt(in.C0) : in.C0) : nullptr);
    ins.push_back(c.peep ? add(in.P) : nullptr);
  }
  while (!ins.empty() && !ins.back()) ins.pop_back();
  if (outputs < 0) outputs = c.cell == Cell::kLstm ? 3 : 2;
  Node* n = g.AddNode(OpName(c.cell), ins, outputs);
  n->SetAttr("hidden_size", Attribute::Int(c.H));
  n->SetAttr("direction", Attribute::String(c.direction));
  if (layout) n->SetAttr("layout", Attribute::Int(layout));
  if (!c.acts.empty()) n->SetAttr("activations", Attribute::Strings(c.acts));
  if (!c.alphas.empty()) n->SetAttr("activation_alpha", Attribute::Floats(c.alphas));
  if (!c.betas.empty()) n->SetAttr("activation_beta", Attribute::Floats(c.betas));
  if (c.clip > 0) n->SetAttr("clip", Attribute::Float(c.clip));
  if (c.lbr) n->SetAttr("linear_before_reset", Attribute::Int(1));
  if (c.input_forget) n->SetAttr("input_forget", Attribute::Int(1));
  for (int i = 0; i < outputs; ++i) g.AddOutput(n->output(i));
  absl::Status s = InferShapes(g);
  if (!s.ok()) return s;
  Executor ex;
  return ex.Run(g, feeds);
}

void Check(const Config& c, float tol = 2e-5f) {
  Inputs in = MakeInputs(c);
  auto r = RunCell(c, in);
  ASSERT_TRUE(r.ok()) << r.status();
  auto want = Reference(c, in);
  const int64_t D = c.direction == "bidirectional" ? 2 : 1;
  EXPECT_EQ((*r)[0].dims(), (Dims{c.T, D, c.B, c.H}));
  EXPECT_EQ((*r)[1].dims(), (Dims{D, c.B, c.H}));
  ExpectNear(Floats((*r)[0]), want[0], tol);
  ExpectNear(Floats((*r)[1]), want[1], tol);
  if (c.cell == Cell::kLstm) ExpectNear(Floats((*r)[2]), want[2], tol);
}

TEST(RecurrentOps, AllCellsAllDirections) {
  for (Cell cell : {Cell::kLstm, Cell::kGru, Cell::kRnn})
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      SCOPED_TRACE(std::string(OpName(cell)) + " " + dir);
      Config c;
      c.cell = cell;
      c.direction = dir;
      Check(c);
      c.seq_lens = c.init_h = c.init_c = true;
      Check(c);
      c.bias = false;
      c.B = 5;  // lengths 4, 3, 2, 1, 0
      Check(c);
    }
}

TEST(RecurrentOps, LstmPeepholesClipInputForget) {
  Config c;
  c.direction = "bidirectional";
  c.peep = c.init_c = c.init_h = true;
  Check(c);
  c.clip = 0.3f;
  Check(c);
  c.input_forget = true;
  Check(c);
}

TEST(RecurrentOps, GruLinearBeforeReset) {
  for (const char* dir : {"forward", "bidirectional"}) {
    Config c;
    c.cell = Cell::kGru;
    c.direction = dir;
    c.lbr = true;
    c.init_h = c.seq_lens = true;
    Check(c);
  }
}

TEST(RecurrentOps, ActivationsWithAlphaBeta) {
  Config c;
  c.cell = Cell::kLstm;
  c.direction = "bidirectional";
  c.acts = {"HardSigmoid", "ScaledTanh", "Softsign", "Sigmoid", "LeakyRelu", "Elu"};
  c.alphas = {0.3f, 1.5f, 0.2f, 0.9f};
  c.betas = {0.4f, 0.7f};
  Check(c);
  Config g;
  g.cell = Cell::kGru;
  g.acts = {"Affine", "Softplus"};
  g.alphas = {0.5f};
  g.betas = {0.25f};
  Check(g);
  Config r;
  r.cell = Cell::kRnn;
  r.direction = "bidirectional";
  r.acts = {"Relu", "ThresholdedRelu"};
  r.alphas = {0.1f};
  Check(r);
}

TEST(RecurrentOps, BatchMajorLayout) {
  for (Cell cell : {Cell::kLstm, Cell::kGru, Cell::kRnn}) {
    Config c;
    c.cell = cell;
    c.direction = "bidirectional";
    c.init_h = c.init_c = c.seq_lens = true;
    Inputs in = MakeInputs(c);
    auto r0 = RunCell(c, in, 0);
    auto r1 = RunCell(c, in, 1);
    ASSERT_TRUE(r0.ok() && r1.ok()) << r1.status();
    const int64_t T = c.T, B = c.B, D = 2, H = c.H;
    ASSERT_EQ((*r1)[0].dims(), (Dims{B, T, D, H}));
    ASSERT_EQ((*r1)[1].dims(), (Dims{B, D, H}));
    std::vector<float> y0 = Floats((*r0)[0]), y1 = Floats((*r1)[0]);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t k = 0; k < H; ++k)
            EXPECT_EQ(y1[((b * T + t) * D + d) * H + k], y0[((t * D + d) * B + b) * H + k]);
    for (int o = 1; o < (cell == Cell::kLstm ? 3 : 2); ++o) {
      std::vector<float> h0 = Floats((*r0)[o]), h1 = Floats((*r1)[o]);
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t k = 0; k < H; ++k) EXPECT_EQ(h1[(b * D + d) * H + k], h0[(d * B + b) * H + k]);
    }
  }
}

TEST(RecurrentOps, F16AndOmittedOutputs) {
  Config c;
  c.cell = Cell::kGru;
  Inputs in = MakeInputs(c);
  auto want = Reference(c, in);
  Inputs h = in;
  h.X = CastTensor(in.X, DType::kF16);
  h.W = CastTensor(in.W, DType::kF16);
  h.R = CastTensor(in.R, DType::kF16);
  h.B = CastTensor(in.B, DType::kF16);
  auto r = RunCell(c, h, 0, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].dtype(), DType::kF16);
  ExpectNear(Floats((*r)[0]), want[0], 2e-2f);
}

TEST(RecurrentOps, InferenceShapes) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("T"), Dim::Symbol("B"), Dim(4)})));
  Value* w = g.AddInput("w", Type::Tensor(DType::kF32, Shape::Static({2, 20, 4})));
  Value* r = g.AddInput("r", Type::Tensor(DType::kF32, Shape::Static({2, 20, 5})));
  Node* n = g.AddNode("LSTM", {x, w, r}, 3);
  n->SetAttr("direction", Attribute::String("bidirectional"));
  for (int i = 0; i < 3; ++i) g.AddOutput(n->output(i));
  ASSERT_TRUE(InferShapes(g).ok());
  EXPECT_EQ(n->output(0)->type().ToString(), "f32[T,2,B,5]");
  EXPECT_EQ(n->output(1)->type().ToString(), "f32[2,B,5]");
  EXPECT_EQ(n->output(2)->type().ToString(), "f32[2,B,5]");

  Graph g2;
  Value* x2 = g2.AddInput("x", Type::Tensor(DType::kF32, Shape({Dim::Symbol("B"), Dim(7), Dim(4)})));
  Value* w2 = g2.AddInput("w", Type::Tensor(DType::kF32, Shape::Static({1, 15, 4})));
  Value* r2 = g2.AddInput("r", Type::Tensor(DType::kF32, Shape::Static({1, 15, 5})));
  Node* n2 = g2.AddNode("GRU", {x2, w2, r2}, 2);
  n2->SetAttr("layout", Attribute::Int(1));
  n2->SetAttr("hidden_size", Attribute::Int(5));
  for (int i = 0; i < 2; ++i) g2.AddOutput(n2->output(i));
  ASSERT_TRUE(InferShapes(g2).ok());
  EXPECT_EQ(n2->output(0)->type().ToString(), "f32[B,7,1,5]");
  EXPECT_EQ(n2->output(1)->type().ToString(), "f32[B,1,5]");

  // W with the wrong number of gate rows.
  Graph g3;
  Value* x3 = g3.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({3, 2, 4})));
  Value* w3 = g3.AddInput("w", Type::Tensor(DType::kF32, Shape::Static({1, 16, 4})));
  Value* r3 = g3.AddInput("r", Type::Tensor(DType::kF32, Shape::Static({1, 15, 5})));
  Node* n3 = g3.AddNode("GRU", {x3, w3, r3}, 2);
  g3.AddOutput(n3->output(1));
  EXPECT_FALSE(InferShapes(g3).ok());
}

TEST(RecurrentOps, KernelErrors) {
  Config c;
  c.cell = Cell::kRnn;
  Inputs in = MakeInputs(c);
  {
    Config bad = c;
    bad.acts = {"Swish"};
    EXPECT_FALSE(RunCell(bad, in).ok());
  }
  {
    Inputs b = in;
    b.L = Tensor::FromVector<int32_t>({5, 1, 1}, {3});  // longer than T = 4
    Config s = c;
    s.seq_lens = true;
    EXPECT_FALSE(RunCell(s, b).ok());
  }
  {
    Inputs b = in;
    b.B = Ramp({1, 3}, 0.1f, 0.f);
    EXPECT_FALSE(RunCell(c, b).ok());
  }
}

TEST(RecurrentOps, UpgraderDropsOutputSequence) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1, 1, 2})));
  Node* n = g.AddNode("LSTM", {x, x, x}, 1);
  n->SetAttr("output_sequence", Attribute::Int(1));
  const OpDef* def = OpRegistry::Global().Find(*n);
  ASSERT_TRUE(def && def->upgrade);
  ASSERT_TRUE(def->upgrade(g, n, 1).ok());
  EXPECT_FALSE(n->has_attr("output_sequence"));
}

TEST(RecurrentOps, CostCountsMatrixProducts) {
  Graph g;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({5, 2, 3})));
  Value* w = g.AddInput("w", Type::Tensor(DType::kF32, Shape::Static({1, 16, 3})));
  Value* r = g.AddInput("r", Type::Tensor(DType::kF32, Shape::Static({1, 16, 4})));
  Node* n = g.AddNode("LSTM", {x, w, r}, 2);
  g.AddOutput(n->output(1));
  ASSERT_TRUE(InferShapes(g).ok());
  OpCost cost = NodeCost(*n);
  EXPECT_GE(cost.flops, 5.0 * 2 * 2 * (3 + 4) * 16);
  EXPECT_GT(cost.bytes_read, 0);
}

}  // namespace
}  // namespace kiln
