//===- sweep_results.cc - The results of a design-space sweep -------------===//
#include "tools/kiln/sweep_results.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/support/csv_field.h"
#include "target/api/tasks_report.h"

namespace kiln::cli {
namespace {

std::string Xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

absl::StatusOr<SweepResult> ReadSweepResult(const std::string& tasks_csv, const std::string& name,
                                            const sim::Machine& machine) {
  auto report = target::ParseTasksCsv(tasks_csv, name);
  if (!report.ok()) return report.status();
  SweepResult r;
  r.cycles = report->total.cycles;
  const double mhz = machine.chip().clock_mhz();
  r.latency_us = r.cycles / mhz;
  r.per_second = r.cycles > 0 ? mhz * 1e6 / r.cycles : 0;
  if (report->total.energy_uj >= 0) {
    r.energy_uj = report->total.energy_uj;
    r.watts = r.latency_us > 0 ? r.energy_uj / r.latency_us : 0;
  }
  double weighted = 0, longest = -1;
  for (const target::TaskReportRow& t : report->tasks) {
    if (t.cube_utilization >= 0) weighted += t.cube_utilization * t.cycles * std::max(1, t.cores);
    if (t.cycles > longest) {
      longest = t.cycles;
      r.bound = t.bound.empty() ? t.engine : t.bound;
    }
  }
  r.l2_hit_rate = report->total.l2_hit_rate;
  const double chip = r.cycles * machine.chip().ai_cores();
  r.cube_utilization = chip > 0 ? weighted / chip : 0;
  return r;
}

void MarkPareto(std::vector<SweepResult>* results) {
  for (SweepResult& a : *results) {
    a.pareto = a.error.empty();
    if (!a.pareto) continue;
    for (const SweepResult& b : *results) {
      if (&a == &b || !b.error.empty()) continue;
      const bool no_worse = b.latency_us <= a.latency_us && b.energy_uj <= a.energy_uj;
      const bool better = b.latency_us < a.latency_us || b.energy_uj < a.energy_uj;
      if (no_worse && better) {
        a.pareto = false;
        break;
      }
    }
  }
}

std::string SweepCsv(const std::vector<std::string>& fields, const std::vector<SweepResult>& results) {
  std::string out = absl::StrCat(absl::StrJoin(fields, ","), fields.empty() ? "" : ",",
                                 "cycles,latency_us,per_second,energy_uj,average_watts,cube_utilization,l2_hit_rate,"
                                 "bound,pareto,error\n");
  for (const SweepResult& r : results) {
    std::vector<std::string> row;
    for (const std::string& v : r.values) row.push_back(CsvField(v));
    if (!r.error.empty()) {
      absl::StrAppend(&out, absl::StrJoin(row, ","), row.empty() ? "" : ",", ",,,,,,,,0,", CsvField(r.error), "\n");
      continue;
    }
    absl::StrAppend(&out, absl::StrJoin(row, ","), row.empty() ? "" : ",",
                    absl::StrFormat("%.0f,%.3f,%.1f,%s,%s,%.4f,%s,%s,%d,\n", r.cycles, r.latency_us, r.per_second,
                                    r.energy_uj >= 0 ? absl::StrFormat("%.3f", r.energy_uj) : "",
                                    r.watts >= 0 ? absl::StrFormat("%.2f", r.watts) : "", r.cube_utilization,
                                    r.l2_hit_rate >= 0 ? absl::StrFormat("%.4f", r.l2_hit_rate) : "",
                                    CsvField(r.bound), r.pareto ? 1 : 0));
  }
  return out;
}

std::string SweepSvg(const std::string& title, const std::vector<std::string>& fields,
                     const std::vector<SweepResult>& results) {
  constexpr double kW = 720, kH = 480, kLeft = 80, kRight = 30, kTop = 50, kBottom = 60;
  // Each axis spans the points' range, padded by a tenth of it (or of the
  // value, where every point has the same).
  double min_x = 0, max_x = 0, min_y = 0, max_y = 0;
  bool any = false;
  for (const SweepResult& r : results)
    if (r.error.empty()) {
      min_x = any ? std::min(min_x, r.latency_us) : r.latency_us;
      max_x = any ? std::max(max_x, r.latency_us) : r.latency_us;
      min_y = any ? std::min(min_y, r.energy_uj) : r.energy_uj;
      max_y = any ? std::max(max_y, r.energy_uj) : r.energy_uj;
      any = true;
    }
  auto pad = [](double* lo, double* hi) {
    const double d = *hi > *lo ? (*hi - *lo) / 10 : std::max(1e-9, std::abs(*hi) / 10);
    *lo = std::max(0.0, *lo - d);
    *hi += d;
  };
  pad(&min_x, &max_x);
  pad(&min_y, &max_y);
  auto x = [&](double v) { return kLeft + (v - min_x) / (max_x - min_x) * (kW - kLeft - kRight); };
  auto y = [&](double v) { return kH - kBottom - (v - min_y) / (max_y - min_y) * (kH - kTop - kBottom); };
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"24\" font-size=\"14\">%s</text>\n",
      kW, kH, kLeft, Xml(title));
  // Axes with five ticks each.
  absl::StrAppendFormat(&out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", kLeft,
                        kH - kBottom, kW - kRight, kH - kBottom);
  absl::StrAppendFormat(&out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", kLeft,
                        kTop, kLeft, kH - kBottom);
  for (int i = 0; i <= 5; ++i) {
    const double vx = min_x + (max_x - min_x) * i / 5, vy = min_y + (max_y - min_y) * i / 5;
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.4g</text>\n", x(vx),
                          kH - kBottom + 16, vx);
    absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", kLeft - 6, y(vy) + 4,
                          vy);
  }
  absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">latency (us)</text>\n",
                        (kLeft + kW - kRight) / 2, kH - 18);
  absl::StrAppendFormat(&out,
                        "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">energy "
                        "(uJ)</text>\n",
                        (kTop + kH - kBottom) / 2, (kTop + kH - kBottom) / 2);
  // The frontier, in latency order, then every point (the frontier's red
  // and labelled with its values).
  std::vector<const SweepResult*> frontier;
  for (const SweepResult& r : results)
    if (r.pareto) frontier.push_back(&r);
  std::sort(frontier.begin(), frontier.end(),
            [](const SweepResult* a, const SweepResult* b) { return a->latency_us < b->latency_us; });
  if (frontier.size() > 1) {
    out += "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"1.5\" points=\"";
    for (const SweepResult* r : frontier) absl::StrAppendFormat(&out, "%.1f,%.1f ", x(r->latency_us), y(r->energy_uj));
    out += "\"/>\n";
  }
  for (const SweepResult& r : results) {
    if (!r.error.empty()) continue;
    std::string label;
    for (size_t i = 0; i < r.values.size() && i < fields.size(); ++i)
      absl::StrAppend(&label, i ? ", " : "", fields[i], "=", r.values[i]);
    absl::StrAppendFormat(&out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"><title>%s</title></circle>\n",
                          x(r.latency_us), y(r.energy_uj), r.pareto ? "5" : "3.5", r.pareto ? "#c0392b" : "#7f8c8d",
                          Xml(label));
    if (r.pareto)
      absl::StrAppendFormat(&out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c0392b\">%s</text>\n", x(r.latency_us) + 7,
                            y(r.energy_uj) - 6, Xml(label));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace kiln::cli
