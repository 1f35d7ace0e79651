//===- printer_parser_test.cc - The .kir text form ------------------------===//
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "graph/ir/dot.h"
#include "graph/ir/graph.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/verifier/verifier.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

Model MustParse(absl::string_view text, const BlobStore* blobs = nullptr) {
  auto m = ParseModel(text, "test.kir", blobs);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return Model();
  return std::move(*m);
}

// print(parse(text)) == text, and once more.
void ExpectCanonical(absl::string_view text) {
  Model m = MustParse(text);
  PrintOptions po;
  po.inline_all_constants = true;
  std::string printed = PrintModel(m, po);
  EXPECT_EQ(printed, text);
  Model again = MustParse(printed);
  EXPECT_EQ(PrintModel(again, po), printed);
}

//===----------------------------------------------------------------------===//
// Round trips of hand-written text
//===----------------------------------------------------------------------===//

TEST(KirRoundTrip, EveryFeature) {
  ExpectCanonical(R"(kiln.model ir_version 8 producer "pytorch" producer_version "2.1" opset {"" = 17, "com.microsoft" = 1}
graph @main(%x: f32[batch,3,224,224], %"onnx::Conv_12": f32[64,3,7,7], %cond: bool[], %s: seq<f32[*]>, %o: opt<i64[?]>, %u: ?, %q: f16["seq len",?,4]) {
  %shape = const i64[2] dense [1, -1]
  %e = const f32[0,3] dense []
  %w = const f32[2,2] elided
  %unk = const ? elided
  %c1 = Conv(%x, %"onnx::Conv_12", _) {dilations = [1, 1], group = 1, pads = [3, 3, 3, 3], strides = [2, 2]} : f32[batch,64,112,112] name "/conv1/Conv"
  %"/layer1/Conv_output_0", %b = Split(%c1, %shape) {axis = 1} : f32[batch,32,112,112], f32[batch,32,112,112]
  %n = com.microsoft.FusedMatMul(%b, %b, _, _) {alpha = 0.125, transA = 0}
  %k = "odd op"(%n)
  %k2 = "my.domain"::"Op.With.Dots"(%k)
  %k3 = ai.onnx.ml.Scaler(%k2) {offset = [0.5, -1.0], scale = floats []} : f32[*]
  %t = Foo(%k3) {a = "str\"with\\escapes\n\t\x01", b = ["x", ""], c = strings [], d = ints [], e = tensor f32[2] dense [1.0, 2.5], f = [tensor i8[] dense [-3], tensor undef], g = tensors [], h = type seq<opt<bf16[1,?,n]>>, i = -1.5e-07, j = inf, k = -inf, l = nan, m = [nan(0x7fc00001), -nan, 1e+20]}
  %r = If(%cond) {else_branch = graph @else() {
    %e1 = Relu(%c1) : f32[batch,64,112,112]
    return %e1
  }, then_branch = graph @"then branch"() {
    %t1 = Loop(_, %cond) {body = graph @body(%i: i64[], %c: bool[]) {
      %z = Add(%c1, %t) : f32[?]
      return %c, %z
    }} : f32[?]
    return %t1
  }} : f32[?] name "if/0"
  %g2 = Scan(%r) {bodies = [graph @a() {
    return %r
  }, graph @""() {
    return
  }], "weird attr" = 0}
  Print(%g2)
  "const"(%g2)
  "return"()
  return %r, %"/layer1/Conv_output_0", %x
}
)");
}

// Inputs with initial values (variables a run may leave out), inline and
// through the blob store, kept by Clone.
TEST(KirRoundTrip, InputInitialValues) {
  ExpectCanonical(R"(kiln.model ir_version 8
graph @main(%x: f32[2], %w: f32[2] = dense [0.5, -1.0], %step: f32[] = dense [3.0]) {
  %y = Mul(%x, %w) : f32[2]
  return %y, %step
}
)");
  Model m;
  std::vector<float> big(100, 0.25f);
  Value* w = m.graph->AddInput("w", Type::Of(Tensor::FromVector<float>(big, {10, 10})));
  w->set_initial(Tensor::FromVector<float>(big, {10, 10}));
  m.graph->AddOutput(m.graph->AddNode("Relu", {w}, 1)->output(0));
  BlobStore blobs;
  std::string text = PrintModel(m, {}, &blobs);
  EXPECT_NE(text.find("graph @main(%w: f32[10,10] = blob \""), std::string::npos) << text;
  Model back = MustParse(text, &blobs);
  EXPECT_TRUE(back.graph->inputs()[0]->initial().Equals(w->initial()));
  EXPECT_TRUE(VerifyModel(back).ok());
  Model copy = back.Clone();
  EXPECT_TRUE(copy.graph->inputs()[0]->initial().Equals(w->initial()));
  // Without the store the value is missing: an error, not an input that
  // silently became required.
  auto missing = ParseModel(text, "v.kir");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("the initial value of input %w is a blob that is not in the blob store"),
            std::string::npos)
      << missing.status();
  // The verifier checks the value against the input's type.
  copy.graph->inputs()[0]->set_initial(Tensor::FromVector<float>({1.0f}, {1}));
  absl::Status v = VerifyModel(copy);
  EXPECT_NE(v.message().find("graph input %w has type f32[10,10] but an initial value of f32[1]"), std::string::npos)
      << v;
}

TEST(KirRoundTrip, MinimalGraphs) {
  ExpectCanonical("kiln.model ir_version 8\ngraph @main() {\n  return\n}\n");
  ExpectCanonical("kiln.model ir_version 3\ngraph @\"\"(%a: ?) {\n  return %a, %a\n}\n");
}

TEST(KirRoundTrip, EveryDtypeInline) {
  ExpectCanonical(R"(kiln.model ir_version 8
graph @main() {
  %f32 = const f32[8] dense [0.0, -0.0, 1.0, 0.1, 3.4028235e+38, 1e-45, inf, nan]
  %f64 = const f64[5] dense [0.1, -2.0, 1.7976931348623157e+308, 5e-324, nan(0x7ff0000000000001)]
  %f16 = const f16[6] dense [0.1, 65504.0, 6e-08, -inf, -nan, nan(0x7c01)]
  %bf16 = const bf16[4] dense [0.1, 3.39e+38, -1.0, nan]
  %i8 = const i8[2] dense [-128, 127]
  %i16 = const i16[2] dense [-32768, 32767]
  %i32 = const i32[2] dense [-2147483648, 2147483647]
  %i64 = const i64[2] dense [-9223372036854775808, 9223372036854775807]
  %u8 = const u8[2] dense [0, 255]
  %u16 = const u16[1] dense [65535]
  %u32 = const u32[1] dense [4294967295]
  %u64 = const u64[1] dense [18446744073709551615]
  %bool = const bool[2,1] dense [true, false]
  %str = const str[3] dense ["a", "", "\"q\""]
  %c64 = const c64[2] dense [(1.0, -2.0), (0.5, nan)]
  %c128 = const c128[1] dense [(0.1, 1e+300)]
  %scalar = const f32[] dense [2.0]
  return
}
)");
}

//===----------------------------------------------------------------------===//
// Round trips of built graphs
//===----------------------------------------------------------------------===//

std::string PrintInline(const Model& m) {
  PrintOptions po;
  po.inline_all_constants = true;
  return PrintModel(m, po);
}

// Every f16 and bf16 bit pattern, and random f32/f64 bit patterns, survive.
TEST(KirRoundTrip, FloatBitsExact) {
  Model m;
  Tensor h(DType::kF16, {65536}), b(DType::kBF16, {65536});
  for (int i = 0; i < 65536; ++i) {
    h.data<Half>()[i] = Half::FromBits(static_cast<uint16_t>(i));
    b.data<BFloat16>()[i] = BFloat16::FromBits(static_cast<uint16_t>(i));
  }
  std::mt19937_64 rng(42);
  Tensor f(DType::kF32, {20000}), d(DType::kF64, {20000});
  std::vector<float> attr_floats;
  for (int i = 0; i < 20000; ++i) {
    uint64_t r = rng();
    f.data<float>()[i] = std::bit_cast<float>(static_cast<uint32_t>(i % 3 ? r : r & 0x807fffffu));
    d.data<double>()[i] = std::bit_cast<double>(i % 3 ? r : r & 0x800fffffffffffffull);
    if (i < 2000) attr_floats.push_back(f.data<float>()[i]);
  }
  Value* ch = m.graph->AddConstant("h", h);
  Value* cb = m.graph->AddConstant("b", b);
  m.graph->AddConstant("f", f);
  m.graph->AddConstant("d", d);
  Node* n = m.graph->AddNode("Foo", {ch, cb}, 1);
  n->SetAttr("floats", Attribute::Floats(attr_floats));
  n->SetAttr("float", Attribute::Float(std::bit_cast<float>(0xffbadbadu)));
  std::string text = PrintInline(m);
  Model back = MustParse(text);
  EXPECT_EQ(PrintInline(back), text);
  for (const char* name : {"h", "b", "f", "d"}) {
    Value* v = back.graph->Lookup(name);
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(v->constant().Equals(m.graph->Lookup(name)->constant())) << name;
  }
  const Node* bn = *back.graph->nodes().begin();
  const std::vector<float>& fl = bn->attr("floats")->floats();
  ASSERT_EQ(fl.size(), attr_floats.size());
  for (size_t i = 0; i < fl.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(fl[i]), std::bit_cast<uint32_t>(attr_floats[i])) << i;
  EXPECT_EQ(std::bit_cast<uint32_t>(bn->attr("float")->f()), 0xffbadbadu);
}

TEST(KirRoundTrip, ShortestFloatText) {
  Model m;
  m.graph->AddConstant("a", Tensor::FromVector<float>({0.1f, 1.0f, 100.0f, 1e10f, 123456790.0f}, {5}));
  Tensor h(DType::kF16, {2});
  h.data<Half>()[0] = Half(0.1f);
  h.data<Half>()[1] = Half(1000.0f);
  m.graph->AddConstant("h", h);
  std::string text = PrintInline(m);
  EXPECT_NE(text.find("dense [0.1, 1.0, 100.0, 1e+10, 123456792.0]"), std::string::npos) << text;
  EXPECT_NE(text.find("f16[2] dense [0.1, 1000.0]"), std::string::npos) << text;
}

// Builds a model with nested graphs, symbolic dims, omitted inputs and
// awkward names through the Graph API; checks print -> parse -> print.
TEST(KirRoundTrip, BuiltGraph) {
  Model m;
  m.ir_version = 7;
  m.producer_name = "kiln \"test\"";
  m.opsets[""] = 13;
  m.opsets["ai.onnx.ml"] = 3;
  Graph& g = *m.graph;
  g.set_name("torch-jit-export");
  Value* x = g.AddInput("input.1", Type::Tensor(DType::kF32, Shape({Dim::Symbol("N"), Dim(3), Dim()})));
  Value* w = g.AddConstant("onnx::Conv_12", Tensor::FromVector<float>(std::vector<float>(64, 0.25f), {4, 16}));
  Node* a = g.AddNode("Gemm", {x, w, nullptr}, std::vector<std::string>{"/layer1/Gemm_output_0"});
  a->set_name("/layer1/Gemm");
  a->SetAttr("transB", Attribute::Int(1));
  a->SetAttr("alpha", Attribute::Float(1.0f));
  a->output(0)->set_type(Type::Tensor(DType::kF32, Shape({Dim::Symbol("N"), Dim(4)})));
  Node* trailing = g.AddNode("Clip", {a->output(0)}, 1);
  trailing->SetInput(2, g.AddConstant("max", Tensor::Scalar<float>(6.0f)));  // input 1 stays omitted
  auto body = std::make_unique<Graph>("loop body", &g);
  Value* it = body->AddInput("it", Type::Tensor(DType::kI64, Shape::Scalar()));
  Value* cond = body->AddInput("c", Type::Tensor(DType::kBool, Shape::Scalar()));
  Node* inner = body->AddNode("Add", {trailing->output(0), a->output(0)}, 1);  // captures outer values
  body->AddOutput(cond);
  body->AddOutput(inner->output(0));
  (void)it;
  Node* loop = g.AddNode("Loop", {nullptr, nullptr}, 1);
  loop->SetAttr("body", Attribute::GraphValue(std::move(body)));
  g.AddOutput(loop->output(0));
  g.AddOutput(x);

  std::string text = PrintInline(m);
  Model back = MustParse(text);
  EXPECT_EQ(PrintInline(back), text);
  EXPECT_EQ(back.ir_version, 7);
  EXPECT_EQ(back.producer_name, "kiln \"test\"");
  EXPECT_EQ(back.opsets.at("ai.onnx.ml"), 3);
  EXPECT_EQ(back.graph->name(), "torch-jit-export");
  const Node* bt = back.graph->NodeList()[1];
  EXPECT_EQ(bt->num_inputs(), 3);
  EXPECT_EQ(bt->input(1), nullptr);
  const Graph* bb = back.graph->NodeList()[2]->attr("body")->g();
  ASSERT_NE(bb, nullptr);
  EXPECT_EQ(bb->parent(), back.graph.get());
  EXPECT_EQ(bb->NodeList()[0]->input(0), bt->output(0));
  EXPECT_NE(text.find("%\"onnx::Conv_12\""), std::string::npos);
  EXPECT_NE(text.find("%\"/layer1/Gemm_output_0\" = Gemm(%input.1, %\"onnx::Conv_12\", _)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("%v.0 = Clip(%\"/layer1/Gemm_output_0\", _, %max)"), std::string::npos) << text;
  EXPECT_NE(text.find("body = graph @\"loop body\"(%it: i64[], %c: bool[]) {"), std::string::npos) << text;

  // Cloning keeps the text.
  Model clone = back.Clone();
  EXPECT_EQ(PrintInline(clone), text);
}

//===----------------------------------------------------------------------===//
// Blobs
//===----------------------------------------------------------------------===//

TEST(KirBlobs, LargeTensorsGoToTheStore) {
  Model m;
  std::vector<float> big(100);
  for (int i = 0; i < 100; ++i) big[i] = i * 0.5f;
  Value* c = m.graph->AddConstant("w", Tensor::FromVector<float>(big, {10, 10}));
  Value* s = m.graph->AddConstant("s", Tensor::FromVector<int64_t>({1, -1}, {2}));
  Node* n = m.graph->AddNode("Foo", {c, s}, 1);
  n->SetAttr("value", Attribute::TensorValue(Tensor::FromVector<int32_t>(std::vector<int32_t>(17, 3), {17})));
  n->SetAttr("small", Attribute::TensorValue(Tensor::FromVector<int32_t>(std::vector<int32_t>(16, 3), {16})));
  m.graph->AddOutput(n->output(0));

  BlobStore blobs;
  std::string text = PrintModel(m, {}, &blobs);
  EXPECT_EQ(blobs.size(), 2u);
  std::string wh = BlobHashString(StableTensorHash(c->constant()));
  EXPECT_NE(text.find("%w = const f32[10,10] blob \"" + wh + "\""), std::string::npos) << text;
  EXPECT_NE(text.find("%s = const i64[2] dense [1, -1]"), std::string::npos) << text;
  EXPECT_NE(text.find("value = tensor i32[17] blob \""), std::string::npos) << text;
  EXPECT_NE(text.find("small = tensor i32[16] dense ["), std::string::npos) << text;

  // With the store: exact.
  Model back = MustParse(text, &blobs);
  EXPECT_EQ(PrintModel(back, {}, nullptr), text);
  EXPECT_TRUE(back.graph->Lookup("w")->constant().Equals(c->constant()));

  // Through a file.
  std::string path = (std::filesystem::temp_directory_path() / "kiln_test.kir.blobs").string();
  ASSERT_TRUE(SaveBlobStore(blobs, path).ok());
  BlobStore loaded;
  absl::Status ls = LoadBlobStore(path, &loaded);
  ASSERT_TRUE(ls.ok()) << ls;
  EXPECT_EQ(loaded.size(), 2u);
  Model from_file = MustParse(text, &loaded);
  EXPECT_EQ(PrintModel(from_file), text);
  std::remove(path.c_str());

  // Without the store, a constant blob becomes an elided constant; a tensor
  // attribute blob is an error.
  std::string no_attr = text;
  size_t p = no_attr.find(", value = tensor i32[17] blob \"");
  ASSERT_NE(p, std::string::npos);
  size_t q = no_attr.find('"', no_attr.find("blob \"", p) + 6);
  no_attr.erase(p, q + 1 - p);
  Model elided = MustParse(no_attr);
  Value* ew = elided.graph->Lookup("w");
  EXPECT_TRUE(ew->is_constant());
  EXPECT_FALSE(ew->constant().defined());
  EXPECT_EQ(ew->type().ToString(), "f32[10,10]");
  EXPECT_NE(PrintModel(elided).find("%w = const f32[10,10] elided"), std::string::npos);
  auto missing = ParseModel(text, "t.kir");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tensor attribute blob"), absl::string_view::npos) << missing.status();
}

TEST(KirBlobs, InlineAllAndThreshold) {
  Model m;
  m.graph->AddConstant("w", Tensor::FromVector<float>(std::vector<float>(40, 1.0f), {40}));
  PrintOptions all;
  all.inline_all_constants = true;
  EXPECT_NE(PrintModel(m, all).find("dense ["), std::string::npos);
  PrintOptions high;
  high.max_inline_elements = 40;
  EXPECT_NE(PrintModel(m, high).find("dense ["), std::string::npos);
  PrintOptions low;
  low.max_inline_elements = 39;
  EXPECT_NE(PrintModel(m, low).find("blob \""), std::string::npos);
}

TEST(KirBlobs, StableHash) {
  // Pinned: these must not change from build to build.
  EXPECT_EQ(BlobHashString(StableTensorHash(Tensor::FromVector<float>({1, 2, 3}, {3}))), "f8711c2caca274f0");
  EXPECT_EQ(BlobHashString(StableTensorHash(Tensor::FromVector<int64_t>({1, 2, 3}, {3}))), "895cd44bb79d6ed1");
  Tensor s(DType::kString, {2});
  s.data<std::string>()[0] = "ab";
  EXPECT_EQ(BlobHashString(StableTensorHash(s)), "f6ea7ca4cba56cba");
  // Dims and dtype are part of the hash.
  EXPECT_NE(StableTensorHash(Tensor::FromVector<float>({1, 2, 3, 4}, {4})),
            StableTensorHash(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2})));
  EXPECT_NE(StableTensorHash(Tensor::FromVector<int32_t>({0}, {1})),
            StableTensorHash(Tensor::FromVector<float>({0}, {1})));
}

TEST(KirBlobs, CorruptStoreIsAnError) {
  BlobStore blobs;
  blobs.Add(Tensor::FromVector<float>(std::vector<float>(32, 2.0f), {32}));
  Tensor s(DType::kString, {2});
  s.data<std::string>()[1] = "xyz";
  blobs.Add(s);
  std::string bytes = SerializeBlobStore(blobs);
  BlobStore ok;
  ASSERT_TRUE(DeserializeBlobStore(bytes, &ok).ok());
  EXPECT_EQ(ok.size(), 2u);
  for (const auto& [h, t] : blobs.blobs) EXPECT_TRUE(ok.Find(h)->Equals(t));
  for (size_t n = 0; n < bytes.size(); ++n) {
    BlobStore b;
    EXPECT_FALSE(DeserializeBlobStore(bytes.substr(0, n), &b).ok()) << n;
  }
  std::mt19937 rng(3);
  int detected = 0;
  for (int i = 0; i < 500; ++i) {
    std::string damaged = bytes;
    damaged[8 + rng() % (damaged.size() - 8)] ^= static_cast<char>(1 + rng() % 255);
    BlobStore b;
    detected += !DeserializeBlobStore(damaged, &b).ok();
  }
  EXPECT_EQ(detected, 500);
  BlobStore b;
  absl::Status st = DeserializeBlobStore("not a blob store", &b);
  EXPECT_NE(st.message().find("bad magic"), absl::string_view::npos) << st;
}

// Every payload starts at a multiple of 64 bytes from the store's start;
// read with an owner of 64-byte aligned bytes, numeric tensors borrow their
// payloads where they lie (strings are copied). Version 1 stores, without
// the padding, still load.
TEST(KirBlobs, PayloadsAreAlignedAndBorrowedWhereTheyLie) {
  BlobStore blobs;
  blobs.Add(Tensor::FromVector<float>({1, 2, 3}, {3}));
  blobs.Add(Tensor::FromVector<int64_t>({7, 8}, {1, 2}));
  Tensor s(DType::kString, {1});
  s.data<std::string>()[0] = "xyz";
  blobs.Add(s);
  const std::string bytes = SerializeBlobStore(blobs);
  // An aligned copy of the bytes, held by the owner.
  auto owner = std::make_shared<Tensor>(DType::kU8, Dims{static_cast<int64_t>(bytes.size())});
  std::memcpy(owner->raw(), bytes.data(), bytes.size());
  const char* base = static_cast<const char*>(owner->raw());
  BlobStore read;
  ASSERT_TRUE(DeserializeBlobStore(absl::string_view(base, bytes.size()), &read, BlobHashes::kVerify, owner).ok());
  ASSERT_EQ(read.size(), 3u);
  for (const auto& [h, t] : blobs.blobs) {
    const Tensor* r = read.Find(h);
    ASSERT_NE(r, nullptr);
    EXPECT_TRUE(r->Equals(t));
    const char* at = static_cast<const char*>(r->raw());
    const bool inside = at >= base && at < base + bytes.size();
    EXPECT_EQ(inside, t.dtype() != DType::kString) << DTypeName(t.dtype());
    if (inside) {
      EXPECT_EQ((at - base) % 64, 0) << DTypeName(t.dtype());
    }
  }
  // Without an owner, the tensors are copies.
  BlobStore copied;
  ASSERT_TRUE(DeserializeBlobStore(bytes, &copied).ok());
  for (const auto& [h, t] : copied.blobs) {
    const char* at = static_cast<const char*>(t.raw());
    EXPECT_FALSE(at >= bytes.data() && at < bytes.data() + bytes.size());
  }
  // Version 1: the same entry without padding.
  std::string v1("KILNBLOB", 8);
  auto put = [&v1](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) v1.push_back(static_cast<char>(v >> (8 * i)));
  };
  const Tensor f = Tensor::FromVector<float>({1, 2, 3}, {3});
  put(1, 4);
  put(1, 8);
  put(StableTensorHash(f), 8);
  put(3, 4);
  v1 += "f32";
  put(1, 4);
  put(3, 8);
  put(12, 8);
  v1.append(static_cast<const char*>(f.raw()), 12);
  BlobStore old;
  ASSERT_TRUE(DeserializeBlobStore(v1, &old).ok());
  ASSERT_NE(old.Find(StableTensorHash(f)), nullptr);
  EXPECT_TRUE(old.Find(StableTensorHash(f))->Equals(f));
}

//===----------------------------------------------------------------------===//
// Parser errors
//===----------------------------------------------------------------------===//

void ExpectParseError(absl::string_view text, absl::string_view message) {
  auto m = ParseModel(text, "bad.kir");
  ASSERT_FALSE(m.ok()) << "parsed: " << text;
  EXPECT_EQ(std::string(m.status().message()), std::string(message)) << "for: " << text;
}

TEST(KirParseErrors, Messages) {
  ExpectParseError("graph @main() {\n  return %x\n}", "bad.kir:2:10: use of undefined value %x");
  ExpectParseError("graph @main(%x: f32[1]) {\n  %y = Relu(%z)\n  return %y\n}",
                   "bad.kir:2:13: use of undefined value %z");
  ExpectParseError("graph @main(%x: f32[1]) {\n  %x = Relu(%x)\n}", "bad.kir:2:3: redefinition of value %x");
  ExpectParseError("graph @main(%x: f32[1], %x: f32[1]) {\n}", "bad.kir:1:25: redefinition of value %x");
  ExpectParseError("graph @main(%x: f32[1]) {\n  %a, %a = Split(%x)\n}", "bad.kir:2:7: redefinition of value %a");
  ExpectParseError("graph @main(%x: f33[1]) {\n}", "bad.kir:1:17: unknown element type 'f33'");
  ExpectParseError("graph @main(%x: f32[-1]) {\n}", "bad.kir:1:21: bad dimension -1 (expected a non-negative integer)");
  ExpectParseError("graph @main(%x: f32) {\n}", "bad.kir:1:20: expected '[' after the element type (a shape such as [1,3], [] or [*]), found ')'");
  ExpectParseError("graph @main(%x: seq<f32[1]) {\n}", "bad.kir:1:27: expected '>' to close seq<...>, found ')'");
  ExpectParseError("graph @main() {\n  %y = Relu(\n", "bad.kir:3:1: expected an input (%value or _), found end of input");
  ExpectParseError("graph @main() {\n  return\n", "bad.kir:3:1: expected a value to return, found end of input");
  ExpectParseError("graph @main() {\n", "bad.kir:2:1: unexpected end of input: missing '}' to close the graph");
  ExpectParseError("graph @main() {\n  return\n}\n}", "bad.kir:4:1: unexpected '}' after the end of the graph");
  ExpectParseError("graph @main() {\n  return\n} trailing", "bad.kir:3:3: unexpected 'trailing' after the end of the graph");
  ExpectParseError("graph @main() {\n  return\n  %y = Relu()\n}", "bad.kir:3:3: use of undefined value %y");
  ExpectParseError("graph @main() {\n  %c = const f32[2] dense [1.0]\n}",
                   "bad.kir:2:21: dense tensor has 1 elements, f32[2] needs 2");
  ExpectParseError("graph @main() {\n  %c = const f32[1] dense [1.0, 2.0]\n}",
                   "bad.kir:2:33: too many elements for f32[1] (expected 1)");
  ExpectParseError("graph @main() {\n  %c = const i8[1] dense [128]\n}", "bad.kir:2:27: 128 is out of range for i8");
  ExpectParseError("graph @main() {\n  %c = const u8[1] dense [-1]\n}", "bad.kir:2:27: -1 is out of range for u8");
  ExpectParseError("graph @main() {\n  %c = const f32[1] dense [1e39]\n}", "bad.kir:2:28: number 1e39 is out of range for f32");
  ExpectParseError("graph @main() {\n  %c = const f32[?] dense [1.0]\n}",
                   "bad.kir:2:14: a constant with data needs a static tensor type, got f32[?]");
  ExpectParseError("graph @main() {\n  %c = const f32[1] dense [nan(0x3f800000)]\n}",
                   "bad.kir:2:28: nan(...) bits do not encode a NaN");
  ExpectParseError("graph @main() {\n  %c = const f32[1] blob \"xyz\"\n}", "bad.kir:2:26: a blob hash has 1 to 16 hex digits");
  ExpectParseError("graph @main(%w: f32[?] = dense [1.0]) {\n}",
                   "bad.kir:1:17: an input with an initial value needs a static tensor type, got f32[?]");
  ExpectParseError("graph @main(%w: f32[2] = dense [1.0]) {\n}", "bad.kir:1:26: dense tensor has 1 elements, f32[2] needs 2");
  ExpectParseError("graph @main(%w: f32[2] = 1.0) {\n}",
                   "bad.kir:1:26: expected 'dense' or 'blob' (the input's initial value), found number 1.0");
  ExpectParseError("graph @main() {\n  %c = const f32[1] gzip\n}", "bad.kir:2:21: expected 'dense', 'blob' or 'elided', found 'gzip'");
  ExpectParseError("graph @main() {\n  %a, %b = const f32[1] elided\n}", "bad.kir:2:7: a constant defines exactly one value");
  ExpectParseError("graph @main() {\n  %y = Foo() {a = 1, a = 2}\n}", "bad.kir:2:22: duplicate attribute 'a'");
  ExpectParseError("graph @main() {\n  %y = Foo() {a = []}\n}",
                   "bad.kir:2:19: an empty list needs its kind: ints [], floats [], strings [], tensors [] or graphs []");
  ExpectParseError("graph @main() {\n  %y = Foo() {a = ints [1.5]}\n}", "bad.kir:2:25: expected an integer");
  ExpectParseError("graph @main() {\n  %y = Foo() {a = [1, \"x\"]}\n}", "bad.kir:2:23: expected a number, found string \"x\"");
  ExpectParseError("graph @main() {\n  %y = Foo() {a = 99999999999999999999}\n}",
                   "bad.kir:2:19: integer 99999999999999999999 is out of range");
  ExpectParseError("graph @main() {\n  %y = Foo() {a = bogus}\n}", "bad.kir:2:19: expected an attribute value, found 'bogus'");
  ExpectParseError("graph @main() {\n  %y = Foo() : f32[1], f32[2]\n}", "bad.kir:2:14: 2 output types for 1 outputs");
  ExpectParseError("graph @main() {\n  %y = const(%y)\n}", "bad.kir:2:13: expected a type, found '('");
  ExpectParseError("graph @main() {\n  %y = return()\n}",
                   "bad.kir:2:8: 'return' is a keyword; write the op name as a string: \"return\"");
  ExpectParseError("graph @main() {\n  %y = a..b()\n}", "bad.kir:2:8: malformed op name 'a..b'");
  ExpectParseError("graph @main() {\n  %y = \"\"()\n}", "bad.kir:2:8: empty op name");
  ExpectParseError("graph @main() {\n  %\"\" = Foo()\n}", "bad.kir:2:3: empty value name");
  ExpectParseError("graph @main() {\n  %y = Foo() name 3\n}",
                   "bad.kir:2:19: expected the node name (a string) after 'name', found number 3");
  ExpectParseError("graph @main() {\n  %y = Foo() {s = \"abc\n\"}\n}", "bad.kir:2:19: unterminated string");
  ExpectParseError("graph @main() {\n  %y = Foo() {s = \"\\q\"}\n}", "bad.kir:2:19: unknown escape '\\q' in string");
  ExpectParseError("graph @main() {\n  %y = Foo() {s = \"\\x4\"}\n}",
                   "bad.kir:2:19: bad \\x escape in string (expected two hex digits)");
  ExpectParseError("graph @main() {\n  $\n}", "bad.kir:2:3: unexpected character '$'");
  ExpectParseError("graph @main() {\n  % = Foo()\n}", "bad.kir:2:3: expected a name after '%'");
  ExpectParseError("graph @main(%x: f32[1]) {\n  %y = If(%x) {g = graph @g() {\n    %x = Relu(%x)\n    return %x\n  }}\n}",
                   "bad.kir:3:5: value %x is already defined in an enclosing graph");
  ExpectParseError("graph @main() {\n  %y = Foo() {g = graph @g() {\n    return %y\n  }}\n}",
                   "bad.kir:3:12: use of undefined value %y");
  ExpectParseError("kiln.model ir_version 8 ir_version 9\ngraph @main() {\n}",
                   "bad.kir:1:25: duplicate 'ir_version' in the model header");
  ExpectParseError("kiln.model opset {\"\" = 1, \"\" = 2}\ngraph @main() {\n}",
                   "bad.kir:1:27: duplicate opset domain \"\"");
  ExpectParseError("kiln.model colour \"red\"\ngraph @main() {\n}", "bad.kir:1:12: unknown model header field 'colour'");
  ExpectParseError("", "bad.kir:1:1: expected 'graph', found end of input");
  ExpectParseError("graph main() {}", "bad.kir:1:7: expected a graph name (@name), found 'main'");
  ExpectParseError("graph @main() {\n  %y = Foo() {t = tensor f32[2] dense [1.0]}\n}",
                   "bad.kir:2:33: dense tensor has 1 elements, f32[2] needs 2");
  ExpectParseError("graph @main() {\n  %y = Foo() {t = tensor f32[1] elided}\n}",
                   "bad.kir:2:33: expected 'dense' or 'blob', found 'elided'");
}

TEST(KirParseErrors, DeepNestingIsAnErrorNotACrash) {
  std::string deep_type = "graph @main(%x: ";
  for (int i = 0; i < 100000; ++i) deep_type += "seq<";
  deep_type += "f32[1]";
  auto m = ParseModel(deep_type, "deep.kir");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("types are nested too deeply"), absl::string_view::npos) << m.status();

  std::string deep_graph = "graph @main() {\n";
  for (int i = 0; i < 10000; ++i) deep_graph += "%y" + std::to_string(i) + " = If() {g = graph @g() {\n";
  auto g = ParseModel(deep_graph, "deep.kir");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested too deeply"), absl::string_view::npos) << g.status();
}

// Every prefix of a valid text and random damage to it: errors, never crashes.
TEST(KirParseErrors, NeverCrashes) {
  const std::string text = R"(kiln.model ir_version 8 opset {"" = 17}
graph @main(%x: f32[batch,3], %c: bool[]) {
  %k = const f16[2] dense [1.0, nan(0x7c01)]
  %s = const str[1] dense ["a\x00b"]
  %y, %z = Split(%x, _) {axis = 1, f = [1.5, -inf], g = tensor u8[2] dense [1, 2]} : f32[batch,1], f32[batch,2] name "n"
  %r = If(%c) {else_branch = graph @e() {
    return %y
  }, then_branch = graph @t() {
    %q = Relu(%z) : f32[?]
    return %q
  }} : f32[?]
  return %r, %k
}
)";
  ASSERT_TRUE(ParseModel(text, "t").ok());
  for (size_t n = 0; n < text.size(); ++n) (void)ParseModel(text.substr(0, n), "t");
  std::mt19937 rng(11);
  const char kChars[] = "%@\"(){}[]<>,=:?*-_ \n0123456789.eaxnfib\\";
  for (int iter = 0; iter < 20000; ++iter) {
    std::string t = text;
    int edits = 1 + rng() % 3;
    for (int k = 0; k < edits; ++k) {
      size_t pos = rng() % t.size();
      switch (rng() % 4) {
        case 0: t[pos] = kChars[rng() % (sizeof(kChars) - 1)]; break;
        case 1: t.erase(pos, 1 + rng() % 8); break;
        case 2: t.insert(pos, 1, kChars[rng() % (sizeof(kChars) - 1)]); break;
        case 3: t[pos] = static_cast<char>(rng()); break;
      }
      if (t.empty()) t = "x";
    }
    auto m = ParseModel(t, "fuzz");
    if (m.ok()) {
      // Whatever parses prints and parses back to the same text.
      PrintOptions po;
      po.inline_all_constants = true;
      std::string p1 = PrintModel(*m, po);
      auto again = ParseModel(p1, "p1");
      ASSERT_TRUE(again.ok()) << again.status() << "\n" << p1;
      EXPECT_EQ(PrintModel(*again, po), p1);
      // The verifier copes with whatever parses (errors, never crashes).
      VerifyOptions vo;
      vo.check_types = false;
      (void)VerifyModel(*m, vo);
      (void)ToDot(*m->graph);
    }
  }
}

TEST(KirParse, AcceptsLooseInput) {
  // No header, comments, no output types, whitespace anywhere, untyped
  // float list with integers, 0/1 for bools.
  Model m = MustParse(R"(// a comment
graph @main( %x : f32[ 2 , n ] ) {   // trailing comment
  %b = const bool[2] dense [1, 0]
  %y = Foo( %x ) { f = [1, 2.5] , i = 3 }
  return %y
})");
  const Node* n = *m.graph->nodes().begin();
  EXPECT_EQ(n->attr("f")->kind(), AttrKind::kFloats);
  EXPECT_EQ(n->attr("f")->floats()[0], 1.0f);
  EXPECT_EQ(n->attr("i")->kind(), AttrKind::kInt);
  EXPECT_TRUE(m.graph->Lookup("b")->constant().data<bool>()[0]);
  EXPECT_EQ(m.opsets.size(), 0u);
  EXPECT_EQ(PrintGraph(*m.graph), R"(graph @main(%x: f32[2,n]) {
  %b = const bool[2] dense [true, false]
  %y = Foo(%x) {f = [1.0, 2.5], i = 3}
  return %y
}
)");
}

TEST(KirParse, ParseGraphAndType) {
  auto g = ParseGraph("graph @g(%a: i32[]) {\n  return %a\n}\n");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->name(), "g");
  EXPECT_FALSE(ParseGraph("kiln.model ir_version 8\ngraph @g() {}").ok());
  auto t = ParseTypeText("seq<f32[1,\"a b\",?]>");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(PrintType(*t), "seq<f32[1,\"a b\",?]>");
  EXPECT_EQ(t->element().shape()[1].symbol(), "a b");
  EXPECT_EQ(PrintType(Type::Tensor(DType::kF32, Shape({Dim::Symbol("3"), Dim::Symbol("?")}))), "f32[\"3\",\"?\"]");
  EXPECT_FALSE(ParseTypeText("f32[1] x").ok());
}

//===----------------------------------------------------------------------===//
// Graphviz
//===----------------------------------------------------------------------===//

TEST(Dot, ExportsNodesConstantsAndClusters) {
  Model m = MustParse(R"(graph @main(%x: f32[2], %c: bool[]) {
  %w = const f32[2] dense [1.0, 2.0]
  %a = Add(%x, %w) : f32[2] name "add \"1\""
  %r = If(%c) {then_branch = graph @t() {
    %t1 = Relu(%a) : f32[2]
    return %t1
  }, else_branch = graph @e() {
    return %a
  }} : f32[2]
  return %r
})");
  std::string dot = ToDot(*m.graph);
  EXPECT_EQ(dot, ToDot(*m.graph));  // deterministic
  EXPECT_EQ(dot, R"(digraph "main" {
  node [fontname="Helvetica", fontsize=10];
  edge [fontname="Helvetica", fontsize=8];
  i0 [label="%x\nf32[2]", shape=ellipse];
  i1 [label="%c\nbool[]", shape=ellipse];
  c2 [label="%w\nf32[2]", shape=box, fontsize=7, height=0.2, margin="0.04,0.02", style=filled, fillcolor="#eeeeee"];
  n3 [label="Add\nadd \"1\"\nf32[2]", shape=box, style="rounded,filled", fillcolor="#dde7f5"];
  i0 -> n3;
  c2 -> n3;
  n4 [label="If\nf32[2]", shape=box, style="rounded,filled", fillcolor="#dde7f5"];
  i1 -> n4;
  subgraph cluster_5 {
    label="If else_branch: @e";
    style=rounded; color="#888888";
    o6 [label="output 0\n%a", shape=ellipse, style=dashed];
    n3 -> o6 [style=dashed];
  }
  o6 -> n4 [style=dotted];
  subgraph cluster_7 {
    label="If then_branch: @t";
    style=rounded; color="#888888";
    n8 [label="Relu\nf32[2]", shape=box, style="rounded,filled", fillcolor="#dde7f5"];
    n3 -> n8 [style=dashed];
    o9 [label="output 0\n%t1", shape=ellipse, style=dashed];
    n8 -> o9;
  }
  o9 -> n4 [style=dotted];
  o10 [label="output 0\n%r", shape=ellipse, style=dashed];
  n4 -> o10;
}
)");
}

}  // namespace
}  // namespace kiln
