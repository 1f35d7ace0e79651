//===- verifier_test.cc - The IR verifier ---------------------------------===//
#include "graph/verifier/verifier.h"

#include <string>

#include "absl/strings/str_split.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

//===----------------------------------------------------------------------===//
// A small registry of test ops, so these tests do not depend on which
// built-in ops exist.
//===----------------------------------------------------------------------===//

absl::Status InferSame(InferContext& ctx) {
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, ctx.has_input(0) ? ctx.input_type(0) : Type());
  return absl::OkStatus();
}

absl::Status InferIf(InferContext& ctx) {
  const Attribute* a = ctx.node().attr("then_branch");
  const Graph* g = a ? a->g() : nullptr;
  for (int i = 0; i < ctx.num_outputs(); ++i)
    ctx.set_output(i, g && i < static_cast<int>(g->outputs().size()) ? g->outputs()[i]->type() : Type());
  return absl::OkStatus();
}

absl::Status InferRank4(InferContext& ctx) {
  const Type& t = ctx.input_type(0);
  if (t.is_tensor() && t.shape().ranked() && t.shape().rank() != 4)
    return ctx.Error("input 0 has rank ", t.shape().rank(), ", expected 4");
  ctx.set_output(0, t);
  return absl::OkStatus();
}

const OpRegistry& TestRegistry() {
  static const OpRegistry* r = [] {
    auto* r = new OpRegistry();
    r->Register("Id").Inputs(1).Outputs(1).Infer(InferSame);
    r->Register("Bin").Inputs(2).Outputs(1).Infer(InferSame);
    r->Register("Opt").Inputs(1, 3).Outputs(1, 2)
        .RequiredAttr("mode", AttrKind::kString)
        .Attr("alpha", AttrKind::kFloat, "1.0")
        .Attr("axes", AttrKind::kInts)
        .Infer(InferSame);
    r->Register("If").Inputs(1).Outputs(1, -1)
        .RequiredAttr("then_branch", AttrKind::kGraph)
        .RequiredAttr("else_branch", AttrKind::kGraph)
        .Infer(InferIf);
    r->Register("Rank4").Inputs(1).Outputs(1).Infer(InferRank4);
    r->Register("Fused", "com.kiln").Inputs(1).Outputs(1);
    r->Register("Var").Inputs(0, -1).Outputs(1);
    return r;
  }();
  return *r;
}

VerifyOptions TestOptions() {
  VerifyOptions o;
  o.registry = &TestRegistry();
  return o;
}

Model Parse(absl::string_view text) {
  auto m = ParseModel(text, "verifier_test.kir");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : Model();
}

std::string Errors(const Model& m) {
  absl::Status s = VerifyModel(m, TestOptions());
  return s.ok() ? "" : std::string(s.message());
}

std::string Errors(absl::string_view text) { return Errors(Parse(text)); }

// `text` fails verification with exactly `expected` (all lines).
void ExpectErrors(absl::string_view text, absl::string_view expected) {
  EXPECT_EQ(Errors(text), expected) << text;
}

constexpr char kGood[] = R"(kiln.model ir_version 8 opset {"" = 17}
graph @main(%x: f32[n,3], %c: bool[]) {
  %k = const f32[3] dense [1.0, 2.0, 3.0]
  %w = const f32[64] elided
  %a = Bin(%x, %k) : f32[n,3] name "add"
  %b = Opt(%a, _, %k) {alpha = 0.5, axes = [0], mode = "fast"} : f32[?,3]
  %b2, %b3 = Opt(%b) {mode = "x"} : f32[n,3], ?
  %r = If(%c) {else_branch = graph @else() {
    %e = Id(%b) : f32[n,3]
    return %e
  }, then_branch = graph @then() {
    %t = Bin(%a, %x) : f32[n,3]
    %t2 = If(%c) {else_branch = graph @e2() {
      return %t
    }, then_branch = graph @t2() {
      return %b2
    }} : f32[n,3]
    return %t2
  }} : f32[n,3]
  %f = com.kiln.Fused(%r)
  %v = Var()
  %u = Id(%unknown_typed) : f32[9]
  return %r, %x, %k
}
)";

//===----------------------------------------------------------------------===//
// Accepting
//===----------------------------------------------------------------------===//

TEST(Verifier, AcceptsAGoodModel) {
  std::string text = kGood;
  // %unknown_typed: an input of unknown type; inference is skipped for %u.
  text.replace(text.find("%c: bool[])"), 11, "%c: bool[], %unknown_typed: ?)");
  Model m = Parse(text);
  absl::Status s = VerifyModel(m, TestOptions());
  EXPECT_TRUE(s.ok()) << s;
  // Each nested graph verified on its own sees the values of its enclosing graphs.
  for (const Node* n : m.graph->nodes())
    for (const Graph* sub : n->subgraphs()) {
      absl::Status ss = VerifyGraph(*sub, TestOptions());
      EXPECT_TRUE(ss.ok()) << ss;
      for (const Node* inner : sub->nodes())
        for (const Graph* sub2 : inner->subgraphs()) {
          absl::Status s2 = VerifyGraph(*sub2, TestOptions());
          EXPECT_TRUE(s2.ok()) << s2;
        }
    }
}

TEST(Verifier, AcceptsBuiltInOps) {
  Model m = Parse(R"(graph @main(%x: f32[2,3], %y: f32[3]) {
  %a = Add(%x, %y) : f32[2,3]
  %r = Relu(%a) : f32[2,3] name "relu"
  %c = Cast(%r) {to = 7} : i64[2,3]
  return %c
})");
  absl::Status s = VerifyModel(m);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Verifier, BuiltInOpsWithWrongDeclaredTypes) {
  Model m = Parse(R"(graph @main(%x: f32[2,3]) {
  %r = Relu(%x) : f32[2,4] name "relu"
  %c = Cast(%r) {to = 7} : f32[2,3]
  %d = Cast(%r)
  return %c, %d
})");
  absl::Status s = VerifyModel(m);
  EXPECT_EQ(std::string(s.message()),
            "graph 'main': node 0 'relu' (Relu): [type] output 0 %r is declared f32[2,4] but inference gives f32[2,3]\n"
            "graph 'main': node 1 (Cast) %c: [type] output 0 %c is declared f32[2,3] but inference gives i64[2,4]\n"
            "graph 'main': node 2 (Cast) %d: [attribute] required attribute 'to' is missing");
}

//===----------------------------------------------------------------------===//
// Rejecting, rule by rule
//===----------------------------------------------------------------------===//

TEST(Verifier, UnknownOp) {
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = Nope(%x)\n  return %y\n}",
               "graph 'main': node 0 (Nope) %y: [op] unknown op 'Nope'");
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = com.other.Fused(%x) name \"f\"\n  return %y\n}",
               "graph 'main': node 0 'f' (com.other.Fused): [op] unknown op 'com.other.Fused'");
}

// A type whose element count or bytes do not fit 64 bits is refused, a zero
// dim among its static dims or not, so no pass or target multiplies and wraps.
TEST(Verifier, TypesWhoseSizeOverflows) {
  ExpectErrors("graph @main(%x: f32[4294967296,4294967296,0]) {\n  %y = Id(%x)\n  return %y\n}",
               "graph 'main': [types] value %x has type f32[4294967296,4294967296,0], whose size does not fit 64 bits");
  ExpectErrors("graph @main(%x: f32[n,2305843009213693952]) {\n  %y = Id(%x)\n  return %x\n}",
               "graph 'main': [types] value %x has type f32[n,2305843009213693952], whose size does not fit 64 bits");
  Model fits = Parse("graph @main(%x: f32[n,576460752303423488], %z: f32[0,4]) {\n  return %x, %z\n}");
  absl::Status s = VerifyModel(fits);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(Verifier, Arity) {
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = Bin(%x)\n  return %y\n}",
               "graph 'main': node 0 (Bin) %y: [arity] has 1 inputs, Bin needs at least 2");
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = Id(%x, %x)\n  return %y\n}",
               "graph 'main': node 0 (Id) %y: [arity] has 2 inputs, Id takes at most 1");
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = Opt(_, %x) {mode = \"m\"}\n  return %y\n}",
               "graph 'main': node 0 (Opt) %y: [arity] required input 0 is missing");
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y, %z, %w = Opt(%x) {mode = \"m\"}\n  return %y\n}",
               "graph 'main': node 0 (Opt) %y: [arity] has 3 outputs, Opt has at most 2");
  ExpectErrors("graph @main(%x: f32[1]) {\n  Id(%x) name \"sink\"\n  return\n}",
               "graph 'main': node 0 'sink' (Id): [arity] has 0 outputs, Id needs at least 1");
}

TEST(Verifier, Attributes) {
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = Opt(%x)\n  return %y\n}",
               "graph 'main': node 0 (Opt) %y: [attribute] required attribute 'mode' is missing");
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = Opt(%x) {beta = 1, mode = \"m\"}\n  return %y\n}",
               "graph 'main': node 0 (Opt) %y: [attribute] undeclared attribute 'beta'");
  ExpectErrors("graph @main(%x: f32[1]) {\n  %y = Opt(%x) {alpha = 1, axes = 0, mode = [\"m\"]}\n  return %y\n}",
               "graph 'main': node 0 (Opt) %y: [attribute] attribute 'alpha' is int, declared float\n"
               "graph 'main': node 0 (Opt) %y: [attribute] attribute 'axes' is int, declared ints\n"
               "graph 'main': node 0 (Opt) %y: [attribute] attribute 'mode' is strings, declared string");
}

TEST(Verifier, Types) {
  ExpectErrors("graph @main(%x: f32[2,3]) {\n  %y = Id(%x) : f32[2,4]\n  return %y\n}",
               "graph 'main': node 0 (Id) %y: [type] output 0 %y is declared f32[2,4] but inference gives f32[2,3]");
  ExpectErrors("graph @main(%x: f32[2,3]) {\n  %y = Id(%x) : i32[2,3]\n  return %y\n}",
               "graph 'main': node 0 (Id) %y: [type] output 0 %y is declared i32[2,3] but inference gives f32[2,3]");
  ExpectErrors("graph @main(%x: f32[2,3]) {\n  %y = Id(%x) : f32[2,3,1]\n  return %y\n}",
               "graph 'main': node 0 (Id) %y: [type] output 0 %y is declared f32[2,3,1] but inference gives f32[2,3]");
  ExpectErrors("graph @main(%x: f32[2,3]) {\n  %y = Id(%x) : seq<f32[2,3]>\n  return %y\n}",
               "graph 'main': node 0 (Id) %y: [type] output 0 %y is declared seq<f32[2,3]> but inference gives f32[2,3]");
  // Symbolic, unknown and unranked dims agree with anything.
  ExpectErrors("graph @main(%x: f32[2,n]) {\n  %y = Id(%x) : f32[m,7]\n  %z = Id(%x) : f32[?,?]\n"
               "  %w = Id(%x) : f32[*]\n  %v = Id(%x) : undef[2,n]\n  return %y\n}",
               "");
  ExpectErrors("graph @main(%x: f32[2,3]) {\n  %y = Rank4(%x) name \"r\"\n  return %y\n}",
               "graph 'main': node 0 'r' (Rank4): [type] inference fails: node 'r' (Rank4): input 0 has rank 2, expected 4");
}

TEST(Verifier, ConstantTypeMatchesData) {
  Model m = Parse("graph @main() {\n  %k = const f32[2] dense [1.0, 2.0]\n  return %k\n}");
  m.graph->Lookup("k")->set_type(Type::Tensor(DType::kF32, Shape({Dim()})));
  EXPECT_EQ(Errors(m), "graph 'main': [constant] constant %k has type f32[?] but its data is f32[2]");
}

TEST(Verifier, UseBeforeDefinition) {
  Model m = Parse("graph @main(%x: f32[1]) {\n  %a = Id(%x)\n  %b = Id(%a)\n  return %b\n}");
  std::vector<Node*> nodes = m.graph->NodeList();
  m.graph->MoveNode(nodes[1], nodes[0]);
  EXPECT_EQ(Errors(m), "graph 'main': node 0 (Id) %b: [order] input 0 %a is used before it is defined");
}

TEST(Verifier, Cycle) {
  Model m = Parse("graph @main(%x: f32[1]) {\n  %a = Bin(%x, %x) name \"a\"\n  %b = Id(%a) name \"b\"\n"
                  "  %c = Id(%b) name \"c\"\n  return %c\n}");
  std::vector<Node*> nodes = m.graph->NodeList();
  nodes[0]->SetInput(1, nodes[2]->output(0));
  EXPECT_EQ(Errors(m),
            "graph 'main': node 0 'a' (Bin): [cycle] nodes form a cycle: node 0 'a' (Bin) -> node 1 'b' (Id) -> "
            "node 2 'c' (Id) -> node 0 'a' (Bin)");
  // A node reading its own output.
  Model self = Parse("graph @main(%x: f32[1]) {\n  %a = Bin(%x, %x)\n  return %a\n}");
  Node* n = self.graph->NodeList()[0];
  n->SetInput(1, n->output(0));
  EXPECT_EQ(Errors(self), "graph 'main': node 0 (Bin) %a: [cycle] nodes form a cycle: node 0 (Bin) %a -> node 0 (Bin) %a");
}

TEST(Verifier, DuplicateNames) {
  Model m;
  Value* x = m.graph->AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1})));
  m.graph->AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1})));
  m.graph->AddOutput(x);
  EXPECT_EQ(Errors(m), "graph 'main': [ssa] value name %x is defined more than once");
}

// If holding a then_branch built by `fill`, in a graph with input %x.
struct IfModel {
  Model m;
  Node* if_node = nullptr;
  Graph* then_g = nullptr;
  Graph* else_g = nullptr;
};

IfModel MakeIf() {
  IfModel r;
  Graph& g = *r.m.graph;
  Value* x = g.AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1})));
  Value* c = g.AddInput("c", Type::Tensor(DType::kBool, Shape::Scalar()));
  auto then_g = std::make_unique<Graph>("then", &g);
  auto else_g = std::make_unique<Graph>("else", &g);
  r.then_g = then_g.get();
  r.else_g = else_g.get();
  r.if_node = g.AddNode("If", {c}, std::vector<std::string>{"r"});
  r.if_node->SetAttr("then_branch", Attribute::GraphValue(std::move(then_g)));
  r.if_node->SetAttr("else_branch", Attribute::GraphValue(std::move(else_g)));
  r.else_g->AddOutput(x);
  g.AddOutput(r.if_node->output(0));
  return r;
}

TEST(Verifier, SubgraphUsesAValueDefinedAfterItsNode) {
  IfModel t = MakeIf();
  Graph& g = *t.m.graph;
  Node* later = g.AddNode("Id", {g.inputs()[0]}, std::vector<std::string>{"later"});
  Node* use = t.then_g->AddNode("Id", {later->output(0)}, std::vector<std::string>{"t"});
  t.then_g->AddOutput(use->output(0));
  EXPECT_EQ(Errors(t.m),
            "graph 'main/then': node 0 (Id) %t: [scope] input 0 %later of enclosing graph 'main' is not defined "
            "before the node holding this graph");
  // Verifying the nested graph alone finds the same.
  absl::Status s = VerifyGraph(*t.then_g, TestOptions());
  EXPECT_NE(s.message().find("[scope] input 0 %later"), absl::string_view::npos) << s;
  use->SetInput(0, g.inputs()[0]);  // valid again before the model is destroyed
}

TEST(Verifier, SubgraphUsesAValueOfASiblingGraph) {
  IfModel t = MakeIf();
  Node* e = t.else_g->AddNode("Id", {t.m.graph->inputs()[0]}, std::vector<std::string>{"e"});
  Node* use = t.then_g->AddNode("Id", {e->output(0)}, std::vector<std::string>{"t"});
  t.then_g->AddOutput(use->output(0));
  EXPECT_EQ(Errors(t.m),
            "graph 'main/then': node 0 (Id) %t: [scope] input 0 %e belongs to graph 'else', which does not "
            "enclose this graph");
  use->SetInput(0, t.m.graph->inputs()[0]);  // valid again before the model is destroyed
}

TEST(Verifier, GraphOutputFromANestedGraph) {
  IfModel t = MakeIf();
  Node* inner = t.then_g->AddNode("Id", {t.m.graph->inputs()[0]}, std::vector<std::string>{"t"});
  t.then_g->AddOutput(inner->output(0));
  t.m.graph->AddOutput(inner->output(0));
  EXPECT_EQ(Errors(t.m),
            "graph 'main': [scope] graph output 1 %t belongs to graph 'then', which does not enclose this graph");
  t.m.graph->SetOutput(1, t.m.graph->inputs()[0]);  // valid again before the model is destroyed
}

TEST(Verifier, SubgraphRedefinesAnOuterName) {
  IfModel t = MakeIf();
  Value* shadow = t.then_g->AddInput("x", Type::Tensor(DType::kF32, Shape::Static({1})));
  t.then_g->AddOutput(shadow);
  EXPECT_EQ(Errors(t.m), "graph 'main/then': [scope] value %x redefines a value of an enclosing graph");
}

TEST(Verifier, SubgraphWithTheWrongParent) {
  IfModel t = MakeIf();
  t.then_g->set_parent(nullptr);
  t.then_g->AddOutput(t.then_g->AddInput("i", Type::Tensor(DType::kF32, Shape::Static({1}))));
  EXPECT_EQ(Errors(t.m),
            "graph 'main': node 0 (If) %r: [scope] the graph 'then' of attribute 'then_branch' does not name "
            "this graph as its parent");
}

TEST(Verifier, MissingSubgraphAttribute) {
  IfModel t = MakeIf();
  t.if_node->RemoveAttr("else_branch");
  t.then_g->AddOutput(t.m.graph->inputs()[0]);
  EXPECT_EQ(Errors(t.m), "graph 'main': node 0 (If) %r: [attribute] required attribute 'else_branch' is missing");
}

TEST(Verifier, ReportsEveryErrorUpToTheLimit) {
  std::string text = "graph @main(%x: f32[1]) {\n";
  for (int i = 0; i < 30; ++i) text += "  %y" + std::to_string(i) + " = Nope(%x)\n";
  text += "  return %x\n}";
  Model m = Parse(text);
  VerifyOptions o = TestOptions();
  o.max_errors = 5;
  absl::Status s = VerifyModel(m, o);
  std::vector<std::string> lines = absl::StrSplit(s.message(), '\n');
  ASSERT_EQ(lines.size(), 6u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(lines[i], "graph 'main': node " + std::to_string(i) + " (Nope) %y" + std::to_string(i) +
                            ": [op] unknown op 'Nope'");
  EXPECT_EQ(lines[5], "(more errors not shown)");
}

TEST(Verifier, TypeChecksCanBeTurnedOff) {
  Model m = Parse("graph @main(%x: f32[2,3]) {\n  %y = Id(%x) : f32[2,4]\n  return %y\n}");
  VerifyOptions o = TestOptions();
  o.check_types = false;
  EXPECT_TRUE(VerifyModel(m, o).ok());
}

TEST(Verifier, ModelWithoutGraph) {
  Model m;
  m.graph.reset();
  EXPECT_EQ(std::string(VerifyModel(m).message()), "model: [ssa] the model has no graph");
}

}  // namespace
}  // namespace kiln
