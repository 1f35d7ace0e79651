//===- roofline.cc - Each kernel of a run under the machine's roofs -------===//
#include "sim/model/roofline.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/isa/isa.h"
#include "sim/machine/machine.h"

namespace kiln::sim {

double RooflinePoint::roof() const {
  double bound = std::max(compute_bound(), memory_bound);
  return bound > 0 ? work() / bound : 0;
}

double RooflinePoint::efficiency() const {
  return cycles > 0 ? std::max(compute_bound(), memory_bound) / cycles : 0;
}

const char* RooflinePoint::limit() const {
  if (compute_bound() <= 0 && memory_bound <= 0) return "none";
  if (memory_bound >= compute_bound()) return "HBM";
  return cube_bound >= vector_bound ? "cube" : "vector";
}

Roofs MachineRoofs(const Machine& m) {
  Roofs r;
  r.cores = m.chip().ai_cores();
  r.clock_mhz = m.chip().clock_mhz();
  r.hbm_bytes_per_cycle = HbmBytesPerCycle(m);
  r.cube_fp16 = 2.0 * m.core().cube_fp16_macs_per_cycle() * r.cores;
  r.cube_fp32 = 2.0 * m.core().cube_fp32_macs_per_cycle() * r.cores;
  r.cube_int8 = 2.0 * m.core().cube_int8_macs_per_cycle() * r.cores;
  // A repeat of 256 bytes of elements takes ceil(256 / width) cycles.
  double cycles_per_repeat = std::ceil(static_cast<double>(kRepeatBytes) / m.core().vector_bytes_per_cycle());
  r.vector_fp16 = kRepeatBytes / 2 / cycles_per_repeat * r.cores;
  r.vector_fp32 = kRepeatBytes / 4 / cycles_per_repeat * r.cores;
  return r;
}

std::vector<RooflinePoint> Roofline(const RunStats& s, const Machine& m) {
  const Roofs roofs = MachineRoofs(m);
  std::vector<RooflinePoint> out;
  out.reserve(s.kernels.size());
  for (const KernelStats& k : s.kernels) {
    RooflinePoint p;
    p.name = k.name;
    p.cores_used = k.cores_used;
    p.cycles = k.end_cycle - k.start_cycle;
    p.cube_flops = 2.0 * static_cast<double>(k.cube_macs);
    p.vector_elements = static_cast<double>(k.vector_elements);
    p.hbm_bytes = static_cast<double>(k.hbm_read_bytes + k.hbm_write_bytes);
    p.cube_bound = k.cube_cycles / roofs.cores;
    p.vector_bound = k.vector_cycles / roofs.cores;
    p.memory_bound = p.hbm_bytes / roofs.hbm_bytes_per_cycle;
    out.push_back(std::move(p));
  }
  return out;
}

std::string RooflineText(const std::vector<RooflinePoint>& points, const Roofs& r) {
  std::string out;
  absl::StrAppendFormat(&out,
                        "roofline (whole chip, %d AI cores): cube %.0f FLOP/cycle fp16, %.0f fp32; vector %.0f "
                        "elements/cycle fp16, %.0f fp32; HBM %.1f B/cycle (fp16 cube ridge at %.1f FLOP/B)\n",
                        r.cores, r.cube_fp16, r.cube_fp32, r.vector_fp16, r.vector_fp32, r.hbm_bytes_per_cycle,
                        r.cube_fp16 / r.hbm_bytes_per_cycle);
  absl::StrAppendFormat(&out, "%-40s %10s %12s %11s %9s %11s %11s %6s  %s\n", "kernel", "cycles", "work", "HBM bytes",
                        "work/B", "work/cycle", "roof", "%roof", "limit");
  for (const RooflinePoint& p : points) {
    std::string name = p.name.size() > 40 ? "..." + p.name.substr(p.name.size() - 37) : p.name;
    absl::StrAppendFormat(&out, "%-40s %10.0f %12.0f %11.0f %9.2f %11.1f %11.1f %5.1f%%  %s\n", name, p.cycles,
                          p.work(), p.hbm_bytes, p.intensity(), p.attained(), p.roof(), 100 * p.efficiency(),
                          p.limit());
  }
  return out;
}

std::string RooflineCsv(const std::vector<RooflinePoint>& points) {
  std::string out =
      "kernel_index,kernel,cycles,cores_used,cube_flops,vector_elements,hbm_bytes,intensity,attained,"
      "compute_bound_cycles,memory_bound_cycles,roof,efficiency,limit\n";
  for (size_t i = 0; i < points.size(); ++i) {
    const RooflinePoint& p = points[i];
    absl::StrAppendFormat(&out, "%d,%s,%.0f,%d,%.0f,%.0f,%.0f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6f,%s\n", i, p.name, p.cycles,
                          p.cores_used, p.cube_flops, p.vector_elements, p.hbm_bytes, p.intensity(), p.attained(),
                          p.compute_bound(), p.memory_bound, p.roof(), p.efficiency(), p.limit());
  }
  return out;
}

namespace {

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// A decade's label: 0.001 ... 10000, then 1e5, 1e6.
std::string DecadeLabel(int e) {
  return e >= -3 && e <= 4 ? absl::StrFormat("%g", std::pow(10.0, e)) : absl::StrFormat("1e%d", e);
}

const char* LimitColour(const std::string& limit) {
  if (limit == "cube") return "#1f77b4";
  if (limit == "vector") return "#ff7f0e";
  return "#d62728";  // HBM
}

}  // namespace

std::string RooflineSvg(const std::vector<RooflinePoint>& points, const Roofs& r, const std::string& title) {
  struct Roof {
    const char* name;
    double peak;
  };
  std::vector<Roof> roofs = {{"cube fp16", r.cube_fp16}, {"cube fp32", r.cube_fp32},
                             {"vector fp16", r.vector_fp16}, {"vector fp32", r.vector_fp32}};
  if (r.cube_int8 != r.cube_fp16) roofs.insert(roofs.begin(), Roof{"cube int8", r.cube_int8});
  std::erase_if(roofs, [](const Roof& f) { return f.peak <= 0; });
  const double bw = std::max(r.hbm_bytes_per_cycle, 1e-9);
  double top_peak = 1;
  for (const Roof& f : roofs) top_peak = std::max(top_peak, f.peak);

  // The kernels a log-log chart can place: some work, some bytes.
  std::vector<const RooflinePoint*> shown;
  double max_cycles = 0;
  for (const RooflinePoint& p : points)
    if (p.work() > 0 && p.hbm_bytes > 0 && p.cycles > 0) {
      shown.push_back(&p);
      max_cycles = std::max(max_cycles, p.cycles);
    }

  // Axes: whole decades around the points and every ridge.
  double xmin = top_peak / bw, xmax = top_peak / bw, ymin = top_peak, ymax = top_peak;
  for (const Roof& f : roofs) xmin = std::min(xmin, f.peak / bw);
  for (const RooflinePoint* p : shown) {
    xmin = std::min(xmin, p->intensity());
    xmax = std::max(xmax, p->intensity());
    ymin = std::min(ymin, p->attained());
  }
  int x0 = static_cast<int>(std::floor(std::log10(xmin))) - 1;
  int x1 = static_cast<int>(std::ceil(std::log10(xmax))) + 1;
  int y1 = static_cast<int>(std::ceil(std::log10(ymax * 1.05)));
  int y0 = std::min(static_cast<int>(std::floor(std::log10(ymin))), y1 - 3);

  const double left = 90, right = 590, top = 50, bottom = 450, width = 800, height = 520;
  auto X = [&](double v) { return left + (std::log10(v) - x0) / (x1 - x0) * (right - left); };
  auto Y = [&](double v) { return bottom - (std::log10(v) - y0) / (y1 - y0) * (bottom - top); };

  std::string out;
  absl::StrAppendFormat(&out,
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                        "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
                        width, height, width, height);
  absl::StrAppendFormat(&out, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", width, height);
  absl::StrAppendFormat(&out, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">%s</text>\n", left, XmlEscape(title));
  // Grid and decade labels.
  out += "<g stroke=\"#e0e0e0\">\n";
  for (int e = x0; e <= x1; ++e)
    absl::StrAppendFormat(&out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", X(std::pow(10.0, e)), top,
                          X(std::pow(10.0, e)), bottom);
  for (int e = y0; e <= y1; ++e)
    absl::StrAppendFormat(&out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", left, Y(std::pow(10.0, e)),
                          right, Y(std::pow(10.0, e)));
  out += "</g>\n<g fill=\"#444\">\n";
  for (int e = x0; e <= x1; ++e)
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", X(std::pow(10.0, e)),
                          bottom + 16, DecadeLabel(e));
  for (int e = y0; e <= y1; ++e)
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6,
                          Y(std::pow(10.0, e)) + 4, DecadeLabel(e));
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">work per HBM byte (FLOP or vector "
                        "element)</text>\n",
                        (left + right) / 2, bottom + 38);
  absl::StrAppendFormat(&out,
                        "<text transform=\"translate(24 %.1f) rotate(-90)\" text-anchor=\"middle\">work per cycle, "
                        "whole chip (%d cores at %.0f MHz)</text>\n",
                        (top + bottom) / 2, r.cores, r.clock_mhz);
  out += "</g>\n";
  absl::StrAppendFormat(&out,
                        "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
                        "stroke=\"#888\"/>\n",
                        left, top, right - left, bottom - top);

  // The roofs: HBM's slope up to the highest ridge, then each compute roof
  // from its own ridge to the right edge.
  const double xs = std::max(std::pow(10.0, x0), std::pow(10.0, y0) / bw);
  const double xr = top_peak / bw;
  out += "<g stroke=\"#333\" stroke-width=\"2\" fill=\"none\">\n";
  absl::StrAppendFormat(&out,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"><title>HBM %.1f "
                        "B/cycle</title></line>\n",
                        X(xs), Y(xs * bw), X(xr), Y(top_peak), bw);
  for (const Roof& f : roofs)
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-dasharray=\"%s\"><title>%s "
                          "%.0f per cycle</title></line>\n",
                          X(f.peak / bw), Y(f.peak), right, Y(f.peak), f.peak == top_peak ? "none" : "6 3", f.name,
                          f.peak);
  out += "</g>\n<g fill=\"#333\">\n";
  for (const Roof& f : roofs)
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\">%s %.0f/cycle</text>\n", right + 6, Y(f.peak) + 4, f.name,
                          f.peak);
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" transform=\"rotate(%.1f %.1f %.1f)\">HBM %.0f "
                        "B/cycle</text>\n",
                        X(xs) + 8, Y(xs * bw) - 8,
                        -std::atan2(Y(xs * bw) - Y(top_peak), X(xr) - X(xs)) * 180 / M_PI, X(xs) + 8, Y(xs * bw) - 8,
                        bw);
  out += "</g>\n";

  // The kernels: largest first, so that small ones stay visible on top.
  std::vector<const RooflinePoint*> order = shown;
  std::stable_sort(order.begin(), order.end(),
                   [](const RooflinePoint* a, const RooflinePoint* b) { return a->cycles > b->cycles; });
  // Each kernel's own roof (the bound of its instruction mix and traffic):
  // a dotted stem from the kernel up to a tick.
  out += "<g stroke=\"#888\" stroke-width=\"1\">\n";
  for (const RooflinePoint* p : order) {
    double x = X(p->intensity()), y = Y(p->attained()), yr = Y(std::max(p->roof(), p->attained()));
    absl::StrAppendFormat(&out,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-dasharray=\"2 2\"/><line "
                          "x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                          x, y, x, yr, x - 5, yr, x + 5, yr);
  }
  out += "</g>\n";
  out += "<g fill-opacity=\"0.6\" stroke=\"#222\" stroke-width=\"0.5\">\n";
  for (const RooflinePoint* p : order) {
    double radius = 3 + 9 * std::sqrt(p->cycles / max_cycles);
    absl::StrAppendFormat(&out,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"><title>%s: %.0f cycles on %d "
                          "cores, %.4g work/B, %.4g work/cycle, %.1f%% of the roof (%s)</title></circle>\n",
                          X(p->intensity()), Y(p->attained()), radius, LimitColour(p->limit()), XmlEscape(p->name),
                          p->cycles, p->cores_used, p->intensity(), p->attained(), 100 * p->efficiency(), p->limit());
  }
  out += "</g>\n";
  // Names of the five longest kernels, each where it overlaps no name
  // placed before it.
  out += "<g font-size=\"10\" fill=\"#222\">\n";
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> placed;
  for (size_t i = 0, named = 0; i < order.size() && named < 5; ++i) {
    const RooflinePoint* p = order[i];
    std::string name = p->name.size() > 28 ? "..." + p->name.substr(p->name.size() - 25) : p->name;
    double x = X(p->intensity()) + 6 + 9 * std::sqrt(p->cycles / max_cycles), y = Y(p->attained()) + 3;
    Box b{x, y - 10, x + 6.0 * static_cast<double>(name.size()), y + 2};
    bool clear = true;
    for (const Box& o : placed) clear &= b.x1 < o.x0 || o.x1 < b.x0 || b.y1 < o.y0 || o.y1 < b.y0;
    if (!clear) continue;
    placed.push_back(b);
    ++named;
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x, y, XmlEscape(name));
  }
  out += "</g>\n";

  // Legend.
  double ly = bottom - 70;
  for (const char* limit : {"cube", "vector", "HBM"}) {
    absl::StrAppendFormat(&out,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" fill-opacity=\"0.6\"/><text x=\"%.1f\" "
                          "y=\"%.1f\">%s-bound</text>\n",
                          right + 12, ly, LimitColour(limit), right + 22, ly + 4, limit);
    ly += 18;
  }
  absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">area: cycles</text>\n", right + 6, ly + 4);
  size_t hidden = points.size() - shown.size();
  double hidden_cycles = 0;
  for (const RooflinePoint& p : points) hidden_cycles += p.cycles;
  for (const RooflinePoint* p : shown) hidden_cycles -= p->cycles;
  if (hidden > 0)
    absl::StrAppendFormat(&out,
                          "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\">%d kernel%s without work or HBM traffic not "
                          "shown (%.0f cycles)</text>\n",
                          left, height - 8, hidden, hidden == 1 ? "" : "s", hidden_cycles);
  absl::StrAppendFormat(&out,
                        "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"end\">ticks: each kernel's own "
                        "roof</text>\n",
                        right, height - 8);
  out += "</svg>\n";
  return out;
}

}  // namespace kiln::sim
