// Self-contained HTML pages of a check and of a plan: inline CSS and SVG, no script, no
// external resource, so a page opens offline and can be mailed or attached to a CI run.
// Every number is printed with the report layer's policy and carries its exact value in
// a data-v attribute (what the tests compare with the JSON).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>

#include "fpguard/format.hpp"
#include "fpguard/report.hpp"
#include "node_numbers.hpp"

namespace fpguard::report {

namespace {

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A number as text with its exact value attached (shortest round-trip decimal).
std::string v(double x, const std::string& text) {
  const std::string exact = std::isfinite(x) ? fmt::format("{}", x) : num(x);
  return fmt::format("<span class=\"n\" data-v=\"{}\">{}</span>", exact, esc(text));
}
std::string v(double x) {
  return v(x, num(x));
}
// An error or a cosine: "n/a" for NaN (nothing finite in both runs).
std::string v_na(double x) {
  return v(x, num_na(x));
}
std::string v_cosine(double c) {
  return v(c, std::isnan(c) ? "n/a" : fixed(c, 6));
}
std::string vc(std::uint64_t n) {
  return fmt::format("<span class=\"n\" data-v=\"{}\">{}</span>", n, count(n));
}

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:24px auto;
max-width:1100px;padding:0 16px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde;
padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.verdict{display:inline-block;padding:4px 14px;border-radius:6px;font-weight:700;
font-size:20px;color:#fff;margin-right:10px}.pass{background:#1a7f37}.fail{background:#c62828}
.qualifiers{font-size:15px;font-weight:600;color:#8a5a00;margin-right:10px}
.sub{color:#556}table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{padding:3px 10px;border-bottom:1px solid #e4e6ee;text-align:left;vertical-align:top}
th{background:#f4f5f9}td.r,th.r{text-align:right;font-variant-numeric:tabular-nums}td.element{padding-left:1.5em}
.bad{color:#c62828;font-weight:600}.ok{color:#1a7f37}.kind{display:inline-block;padding:0 6px;
border-radius:4px;background:#fde8e8;color:#9b1c1c;font-size:12px;font-weight:600}
.kind.accuracy{background:#fff4d6;color:#7a5200}.fix{margin:2px 0 2px 18px;color:#224}
.origin{margin:10px 0 14px;padding:8px 12px;border-left:4px solid #c62828;background:#fbfbfd}
.origin.accuracy{border-color:#d79b00}svg{display:block;margin:6px 0}
code{font-size:12.5px;background:#f2f3f7;padding:0 3px;border-radius:3px}
.legend span{margin-right:14px;font-size:12px}.sw{display:inline-block;width:10px;height:10px;
margin-right:4px;vertical-align:middle}.note{color:#445;font-size:13px}
tr.minor td{color:#778}.fix-all,.next-steps{margin:10px 0;padding:6px 12px;background:#eef4ff}
)";

void page_head(std::ostream& out, const std::string& title) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      << "<meta name=\"viewport\" content=\"width=device-width\"><title>" << esc(title)
      << "</title><style>" << kStyle << "</style></head><body>\n";
}

// ---- SVG charts along the topological order -------------------------------------------

struct Axis {
  double lo, hi;  // data range
  double a, b;    // pixels
  double at(double x) const { return a + (x - lo) / (hi - lo) * (b - a); }
};

struct Point {  // one floating node of a chart
  std::string label;
  double y = 0;
  bool marked = false;  // an origin
};

// Largest log2 |reference| of a node's floating outputs, and the smallest exponent seen.
std::pair<double, double> log_range(const analysis::NodeRecord& n) {
  double hi = -INFINITY, lo = INFINITY;
  for (const auto& t : n.outputs) {
    if (!t.floating) continue;
    if (t.ref_absmax > 0) hi = std::max(hi, std::log2(t.ref_absmax));
    if (!t.exponent_histogram.empty())
      lo = std::min(lo, static_cast<double>(t.exponent_histogram.begin()->first));
  }
  return {hi, lo};
}

// A horizontal band between data values y0 < y1 (clipped to the axis).
void band(std::ostream& out, const Axis& y, double y0, double y1, double x0, double x1,
          const char* fill, const std::string& label) {
  y0 = std::max(y0, y.lo), y1 = std::min(y1, y.hi);
  if (!(y1 > y0)) return;
  out << fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
      "<title>{}</title></rect>\n",
      x0, y.at(y1), x1 - x0, y.at(y0) - y.at(y1), fill, esc(label));
}

void hline(std::ostream& out, const Axis& y, double value, double x0, double x1, const char* color,
           const std::string& label) {
  if (value < y.lo || value > y.hi) return;
  out << fmt::format(
      "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
      "stroke-dasharray=\"5 3\"/><text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"{}\" "
      "text-anchor=\"end\">{}</text>\n",
      x0, x1, y.at(value), y.at(value), color, x1 - 4, y.at(value) - 3, color, esc(label));
}

void y_ticks(std::ostream& out, const Axis& y, double x0, const std::string& prefix, double step) {
  for (double t = std::ceil(y.lo / step) * step; t <= y.hi; t += step)
    out << fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" fill=\"#667\" text-anchor=\"end\">"
        "{}{}</text><line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
        "stroke=\"#99a\"/>\n",
        x0 - 6, y.at(t) + 3, prefix, static_cast<int>(t), x0 - 3, x0, y.at(t), y.at(t));
}

constexpr double kW = 1040, kH = 260, kLeft = 56, kRight = 1030, kTop = 12, kBottom = 228;

void chart_open(std::ostream& out, const char* id, const std::string& title) {
  out << fmt::format(
      "<svg class=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\"><title>{}</title>\n"
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccd\"/>\n",
      id, kW, kH, kW, kH, esc(title), kLeft, kTop, kRight - kLeft, kBottom - kTop);
}

void x_caption(std::ostream& out, std::size_t n) {
  out << fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" fill=\"#556\" text-anchor=\"middle\">"
      "{} floating nodes in topological order</text>\n",
      (kLeft + kRight) / 2, kBottom + 22, n);
}

// Reference absmax of every floating node against the format's range: the headroom.
void headroom_chart(std::ostream& out, const analysis::Diagnosis& d, const Format& f,
                    const std::set<std::string>& origins) {
  std::vector<const analysis::NodeRecord*> nodes;
  double hi = std::log2(f.max()) + 2, lo = std::log2(f.smallest_subnormal()) - 2;
  double seen_lo = INFINITY;
  for (const auto& n : d.nodes) {
    const auto [top, bottom] = log_range(n);
    if (!std::isfinite(top)) continue;
    nodes.push_back(&n);
    hi = std::max(hi, top + 1);
    seen_lo = std::min(seen_lo, bottom);
  }
  if (nodes.empty()) return;
  if (std::isfinite(seen_lo)) lo = std::min(lo, seen_lo - 1);
  lo = std::max(lo, -160.0), hi = std::min(hi, 1030.0);
  const Axis y{lo, hi, kBottom, kTop};
  const Axis x{-0.5, static_cast<double>(nodes.size()) - 0.5, kLeft, kRight};
  chart_open(out, "headroom-chart", "reference |x| range of each node against " + f.name);
  const double lmax = std::log2(f.max()), lnorm = std::log2(f.smallest_normal()),
               lsub = std::log2(f.smallest_subnormal());
  band(out, y, lmax, hi, kLeft, kRight, "#fde4e4", "overflow: beyond " + f.name + " max");
  band(out, y, lsub, lnorm, kLeft, kRight, "#fff6d8", f.name + " subnormals");
  band(out, y, lo, lsub - 1, kLeft, kRight, "#ececf2", "flushes to zero in " + f.name);
  hline(out, y, lmax, kLeft, kRight, "#c62828", "max " + num(f.max()));
  hline(out, y, lnorm, kLeft, kRight, "#8a6d00", "smallest normal " + num(f.smallest_normal()));
  y_ticks(out, y, kLeft, "2^", std::max(4.0, std::ceil((hi - lo) / 10 / 4) * 4));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto [top, bottom] = log_range(*nodes[i]);
    const bool origin = origins.count(nodes[i]->name) > 0;
    const double cx = x.at(static_cast<double>(i));
    if (std::isfinite(bottom))
      out << fmt::format(
          "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#9db0d0\" "
          "stroke-width=\"2\"/>\n",
          cx, y.at(std::max(bottom, lo)), y.at(top));
    out << fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{} ({}): absmax {}, "
        "headroom {}</title></circle>\n",
        cx, y.at(top), origin ? 5 : 3, origin ? "#c62828" : "#2456a6", esc(nodes[i]->name),
        esc(nodes[i]->op_type), num(std::exp2(top)), bits(lmax - top));
  }
  x_caption(out, nodes.size());
  out << "</svg>\n<div class=\"legend\"><span><i class=\"sw\" style=\"background:#2456a6\"></i>"
         "largest |x| (reference)</span><span><i class=\"sw\" style=\"background:#9db0d0\">"
         "</i>down to the smallest non-zero |x|</span><span><i class=\"sw\" "
         "style=\"background:#c62828\"></i>origin</span><span><i class=\"sw\" "
         "style=\"background:#fde4e4\"></i>overflow</span><span><i class=\"sw\" "
         "style=\"background:#fff6d8\"></i>subnormal</span></div>\n";
}

// Relative RMS error each node adds on its own (local) and carries (propagated).
void error_chart(std::ostream& out, const analysis::Diagnosis& d, const Format& f) {
  struct E {
    const analysis::NodeRecord* n;
    double local, propagated;
    bool broken;
  };
  std::vector<E> rows;
  for (const auto& n : d.nodes) {
    if (!n.emulated) continue;
    const detail::NodeNumbers x = detail::node_numbers(n);
    if (x.floating) rows.push_back({&n, x.local, x.propagated, x.propagated_overflow > 0});
  }
  if (rows.empty()) return;
  const double floor_exp = -12, u = std::log10(std::ldexp(1.0, -f.precision_bits()));
  const Axis y{floor_exp, 1, kBottom, kTop};
  const Axis x{-0.5, static_cast<double>(rows.size()) - 0.5, kLeft, kRight};
  auto ypos = [&](double err) {
    if (!(err > 0)) return y.at(floor_exp);
    return y.at(std::clamp(std::log10(err), floor_exp, 1.0));
  };
  chart_open(out, "error-chart", "relative RMS error along the graph");
  y_ticks(out, y, kLeft, "1e", 2);
  hline(out, y, u, kLeft, kRight, "#556", f.name + " unit roundoff");
  std::string path;
  for (std::size_t i = 0; i < rows.size(); ++i)
    path += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", x.at(static_cast<double>(i)),
                        ypos(rows[i].propagated));
  out << "<path d=\"" << path << "\" fill=\"none\" stroke=\"#e08a00\" stroke-width=\"1.5\"/>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double cx = x.at(static_cast<double>(i));
    out << fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#2456a6\"><title>{} ({}): local {}, "
        "propagated {}</title></circle>\n",
        cx, ypos(rows[i].local), esc(rows[i].n->name), esc(rows[i].n->op_type),
        num_na(rows[i].local), num_na(rows[i].propagated));
    if (rows[i].broken)  // errors are over the finite values: mark the inf/NaN on top
      out << fmt::format(
          "<path d=\"M{0:.1f},{1:.1f} l-5,-8 h10 z\" fill=\"#c62828\"><title>{2}: inf/NaN in "
          "the emulated run</title></path>\n",
          cx, kTop + 10, esc(rows[i].n->name));
  }
  x_caption(out, rows.size());
  out << "</svg>\n<div class=\"legend\"><span><i class=\"sw\" style=\"background:#2456a6\"></i>"
         "local: the error the node adds on its own</span><span><i class=\"sw\" "
         "style=\"background:#e08a00\"></i>propagated: the error of the emulated run</span>"
         "<span><i class=\"sw\" style=\"background:#c62828\"></i>inf/NaN (errors over the "
         "finite values)</span></div>\n";
}

// An origin tensor's exponent histogram against the format's bands.
void histogram_chart(std::ostream& out, const std::map<int, std::uint64_t>& hist,
                     const std::string& name, const Format& f, std::size_t id) {
  if (hist.empty()) return;
  const int emax = static_cast<int>(std::floor(std::log2(f.max())));
  const int enorm = static_cast<int>(std::floor(std::log2(f.smallest_normal())));
  const int esub = static_cast<int>(std::floor(std::log2(f.smallest_subnormal())));
  int lo = std::min(hist.begin()->first, esub) - 1;
  int hi = std::max(hist.rbegin()->first, emax) + 1;
  lo = std::max(lo, hi - 300);
  std::uint64_t most = 1;
  for (const auto& [e, c] : hist) most = std::max(most, c);
  const double w = 520, h = 150, l = 40, r = 510, top = 8, bottom = 122;
  const Axis x{lo - 0.5, hi + 0.5, l, r};
  const Axis y{0, std::log10(static_cast<double>(most)) + 0.3, bottom, top};
  out << fmt::format(
      "<svg class=\"histogram h{}\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\"><title>exponent histogram of {}</title>\n",
      id, w, h, w, h, esc(name));
  const Axis xb{lo - 0.5, hi + 0.5, l, r};
  auto vband = [&](double e0, double e1, const char* fill, const std::string& label) {
    e0 = std::max(e0, lo - 0.5), e1 = std::min(e1, hi + 0.5);
    if (e1 > e0)
      out << fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}"
          "</title></rect>\n",
          xb.at(e0), top, xb.at(e1) - xb.at(e0), bottom - top, fill, esc(label));
  };
  vband(emax + 0.5, hi + 0.5, "#fde4e4", "overflow");
  vband(esub - 0.5, enorm - 0.5, "#fff6d8", "subnormal");
  vband(lo - 0.5, esub - 0.5, "#ececf2", "flushes to zero");
  const double bw = std::max(1.0, (r - l) / (hi - lo + 1) - 1);
  for (const auto& [e, c] : hist) {
    if (e < lo || e > hi) continue;
    const double yy = y.at(std::log10(static_cast<double>(c)) + 0.3);
    out << fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
        "<title>2^{}: {} values</title></rect>\n",
        x.at(e) - bw / 2, yy, bw, bottom - yy, e > emax ? "#c62828" : "#2456a6", e, count(c));
  }
  for (int e = (lo / 8) * 8; e <= hi; e += 8)
    if (e >= lo)
      out << fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" fill=\"#667\" text-anchor=\"middle\">"
          "2^{}</text>\n",
          x.at(e), bottom + 13, e);
  out << fmt::format(
      "<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" fill=\"#556\" text-anchor=\"middle\">"
      "floor(log2 |x|) of the reference (bars: log count)</text></svg>\n",
      (l + r) / 2, bottom + 26);
}

// ---- sections --------------------------------------------------------------------------

void outputs_table(std::ostream& out, const std::vector<analysis::OutputVerdict>& outputs) {
  out << "<table class=\"outputs-table\"><tr><th>output</th><th>verdict</th><th class=\"r\">cosine"
         "</th><th class=\"r\">relative RMS error</th><th class=\"r\">max scaled error</th>"
         "<th class=\"r\">max abs error</th><th class=\"r\">max rel error</th>"
         "<th class=\"r\">non-finite</th><th class=\"r\">outside atol/rtol</th></tr>\n";
  auto row = [&](const analysis::OutputVerdict& o, bool element) {
    out << "<tr><td" << (element ? " class=\"element\"" : "") << ">" << esc(o.name)
        << "</td><td class=\"" << (o.pass ? "ok" : "bad") << "\">" << (o.pass ? "ok" : "FAIL")
        << "</td><td class=\"r\">" << v_cosine(o.cosine) << "</td><td class=\"r\">"
        << v_na(o.rel_rms_error) << "</td><td class=\"r\">" << v_na(o.max_scaled_error)
        << "</td><td class=\"r\">" << v_na(o.max_abs_error) << "</td><td class=\"r\">"
        << v_na(o.max_rel_error) << "</td><td class=\"r\">" << vc(o.nonfinite)
        << "</td><td class=\"r\">" << vc(o.outside_tolerance) << "</td></tr>\n";
  };
  for (const auto& o : outputs) {
    row(o, false);
    if (o.mismatch)  // a sequence or optional of another kind or length
      out << "<tr><td></td><td class=\"bad\" colspan=\"8\">"
          << esc(describe(*o.mismatch, o.mismatched_sets)) << "</td></tr>\n";
    for (const auto& e : o.elements) row(e, true);  // a sequence's elements
  }
  out << "</table>\n";
}

const analysis::TensorRecord* tensor_of(const analysis::Diagnosis& d, const std::string& name) {
  for (const auto& n : d.nodes)
    for (const auto& t : n.outputs)
      if (t.floating && t.name == name) return &t;
  return nullptr;
}

void origins_section(std::ostream& out, const analysis::Diagnosis& d, const Format& f) {
  out << "<section class=\"origins\"><h2>Origins: where the trouble starts</h2>\n";
  if (d.origins.empty()) out << "<p>None.</p>\n";
  for (std::size_t i = 0; i < d.origins.size(); ++i) {
    const auto& o = d.origins[i];
    const std::string kind(analysis::to_string(o.kind));
    out << "<div class=\"origin " << kind << "\"><span class=\"kind " << kind << "\">" << kind
        << "</span> <b>" << esc(o.node) << "</b> <span class=\"sub\">(" << esc(o.op_type)
        << ")</span> " << vc(o.affected) << " of " << vc(o.total) << " values"
        << (o.kind == analysis::OriginKind::accuracy || o.op_type == "initializer" ||
                    o.op_type == "Constant" || o.op_type == "input"
                ? ""
                : " in its local run")
        << "<p>" << esc(describe(o)) << "</p>\n";
    for (const auto& x : o.fixes)
      out << "<div class=\"fix\">fix: " << esc(describe(x)) << "</div>\n";
    for (const auto& name : o.outputs)
      if (const auto* t = tensor_of(d, name)) {
        out << "<h3>" << esc(name) << ": exponents against " << esc(f.name) << "</h3>\n";
        histogram_chart(out, t->exponent_histogram, t->name, f, i);
      }
    out << "</div>\n";
  }
  if (const std::string all = describe(combine_fixes(d)); !all.empty())
    out << "<p class=\"fix-all\">" << esc(all) << "</p>\n";
  if (const std::string next = next_steps(d); !next.empty())
    out << "<p class=\"next-steps\">" << esc(next) << "</p>\n";
  out << "</section>\n";
}

void worst_section(std::ostream& out, const analysis::Diagnosis& d, std::size_t top) {
  out << "<section class=\"worst\"><h2>Worst nodes, by damage to the outputs</h2><table "
         "class=\"worst-table\"><tr><th>node</th><th>op</th><th class=\"r\">damage</th>"
         "<th class=\"r\">headroom</th><th class=\"r\">local inf/NaN</th><th class=\"r\">local "
         "error</th><th class=\"r\">propagated inf/NaN</th><th class=\"r\">propagated error</th>"
         "</tr>\n";
  for (const auto& r : detail::worst_nodes(d, top))
    out << "<tr><td>" << esc(r.node->name) << "</td><td>" << esc(r.node->op_type)
        << "</td><td class=\"r\">" << v(r.x.damage, detail::damage_cell(r.x.damage))
        << "</td><td class=\"r\">" << v(r.x.headroom, bits(r.x.headroom)) << "</td><td class=\"r\">"
        << vc(r.x.local_overflow) << "</td><td class=\"r\">"
        << v(r.x.local, detail::error_cell(r.x.local, r.x.local_nonfinite))
        << "</td><td class=\"r\">" << vc(r.x.propagated_overflow) << "</td><td class=\"r\">"
        << v(r.x.propagated, detail::error_cell(r.x.propagated, r.x.propagated_nonfinite))
        << "</td></tr>\n";
  out << "</table><p class=\"note\">damage: the relative RMS error the node gives the outputs, "
         "estimated as its local error capped by the error of the outputs it reaches; local: "
         "the node alone in the format, fed the reference's inputs; propagated: the emulated "
         "run; inf/NaN: values that became inf, NaN or saturated where the reference is "
         "finite.</p></section>\n";
}

// With a reference model: the main-graph tensors matched to the original's, those that left
// the pass criterion against the original's float32 run first, in topological order (the
// first is where the converted model starts to differ), then a count of those within it.
void original_section(std::ostream& out, const analysis::Diagnosis& d, std::size_t top) {
  if (d.reference_model.empty()) return;
  struct Row {
    const analysis::NodeRecord* node;
    const analysis::TensorRecord* t;
  };
  std::vector<Row> off;
  std::size_t matched = 0;
  for (const auto& n : d.nodes)
    for (const auto& t : n.outputs) {
      if (!t.floating || !t.against_original.count) continue;
      ++matched;
      if (!t.against_original.meets(d.min_cosine)) off.push_back({&n, &t});
    }
  out << "<section class=\"against-original\"><h2>Against the original model</h2><p class=\"sub\">"
      << "Each tensor matched to one of " << esc(d.reference_model)
      << "'s, compared with the original run in " << esc(d.reference) << ": "
      << vc(matched - off.size()) << " of " << vc(matched)
      << " within the criterion (finite where the original is, cosine &ge; "
      << v(d.min_cosine, fmt::format("{}", d.min_cosine)) << ").</p>\n";
  if (!off.empty()) {
    out << "<table class=\"original-table\"><tr><th>tensor</th><th>original</th><th>node</th>"
           "<th>op</th><th class=\"r\">cosine</th><th class=\"r\">relative RMS error</th>"
           "<th class=\"r\">max abs error</th><th class=\"r\">non-finite</th></tr>\n";
    for (std::size_t i = 0; i < off.size() && i < top; ++i) {
      const auto& c = off[i].t->against_original;
      out << "<tr><td>" << esc(off[i].t->name) << "</td><td>" << esc(off[i].t->original)
          << "</td><td>" << esc(off[i].node->name) << "</td><td>" << esc(off[i].node->op_type)
          << "</td><td class=\"r\">" << v_cosine(c.cosine()) << "</td><td class=\"r\">"
          << v_na(c.nrmse()) << "</td><td class=\"r\">" << v_na(c.max_abs)
          << "</td><td class=\"r\">" << vc(c.overflow + c.nan) << "</td></tr>\n";
    }
    out << "</table>\n";
    if (off.size() > top)
      out << "<p class=\"note\">" << vc(off.size() - top) << " more outside the criterion.</p>\n";
  }
  out << "</section>\n";
}

void rules_section(std::ostream& out, const analysis::Diagnosis& d) {
  out << "<section class=\"rules\"><h2>Risk rules (" << d.rules.size() << ")</h2>\n";
  if (d.rules.empty()) out << "<p>None fired.</p>\n";
  if (!d.rules.empty()) {
    // The major findings first; the minor ones (below the threshold) after them, dimmed.
    std::vector<const analysis::RuleFinding*> rules;
    for (const auto& r : d.rules) rules.push_back(&r);
    std::stable_sort(rules.begin(), rules.end(),
                     [](const auto* a, const auto* b) { return a->severity > b->severity; });
    out << "<table class=\"rules-table\"><tr><th>rule</th><th>node</th><th>severity</th>"
           "<th>finding</th></tr>\n";
    for (const auto* r : rules) {
      const std::string sev(analysis::to_string(r->severity));
      out << "<tr class=\"" << sev << "\"><td><code>" << esc(r->id) << "</code></td><td>"
          << esc(r->node) << "</td><td>" << sev << "</td><td>" << esc(describe(*r))
          << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  out << "</section>\n";
}

void check_body(std::ostream& out, const analysis::Diagnosis& d, std::size_t top,
                const std::string& id) {
  const Format f = find_format(d.precision).value_or(parse_format("float32"));
  std::set<std::string> origins;
  for (const auto& o : d.origins) origins.insert(o.node);
  std::string qualifiers = verdict_qualifiers(d);
  if (!qualifiers.empty())
    qualifiers = "<span class=\"qualifiers\">" + esc(qualifiers) + "</span> ";
  out << "<article id=\"" << id << "\" data-precision=\"" << esc(d.precision) << "\">\n"
      << "<section class=\"check-verdict\"><h1><span class=\"verdict " << (d.pass ? "pass" : "fail")
      << "\">" << (d.pass ? "PASS" : "FAIL") << "</span>" << qualifiers << esc(d.model) << " in "
      << esc(d.precision) << "</h1><p class=\"sub\">reference " << esc(d.reference)
      << ", accumulation " << esc(d.accumulate) << ", " << d.samples << " input set"
      << (d.samples == 1 ? "" : "s") << "; pass: finite where the reference is and cosine &ge; "
      << v(d.min_cosine, fmt::format("{}", d.min_cosine)) << "</p>\n";
  outputs_table(out, d.outputs);
  if (const std::string advice = generated_advice(d.generated); !advice.empty())
    out << "<p class=\"note\">note: " << esc(advice) << "</p>\n";
  for (const auto& n : d.notes)
    out << "<p class=\"note\">note: " << esc(describe(n, d)) << "</p>\n";
  out << "</section>\n";
  origins_section(out, d, f);
  out << "<section class=\"headroom\"><h2>Headroom along the graph</h2><p class=\"sub\">Each "
         "floating node's reference values against the range of "
      << esc(f.name) << " (max " << num(f.max()) << ", smallest normal " << num(f.smallest_normal())
      << ").</p>\n";
  headroom_chart(out, d, f, origins);
  out << "</section>\n<section class=\"errors\"><h2>Error along the graph</h2>\n";
  error_chart(out, d, f);
  out << "</section>\n";
  worst_section(out, d, top);
  original_section(out, d, top);
  rules_section(out, d);
  out << "</article>\n";
}

}  // namespace

void write_html(std::ostream& out, const std::vector<analysis::Diagnosis>& ds, const HtmlText& o) {
  page_head(out, "fpguard check: " + (ds.empty() ? std::string() : ds.front().model));
  if (ds.size() > 1) {
    out << "<section id=\"side-by-side\"><h1>" << esc(ds.front().model)
        << "</h1><h2>Precisions side by side</h2><table id=\"side-table\"><tr><th>precision</th>"
           "<th>verdict</th><th class=\"r\">min cosine</th><th class=\"r\">origins</th>"
           "<th class=\"r\">rules</th></tr>\n";
    for (const auto& d : ds) {
      double c = 1;
      for (const auto& x : d.outputs)
        c = std::isnan(x.cosine) || std::isnan(c) ? NAN : std::min(c, x.cosine);
      out << "<tr><td><a href=\"#check-" << esc(d.precision) << "\">" << esc(d.precision)
          << "</a></td><td class=\"" << (d.pass ? "ok" : "bad") << "\">"
          << (d.pass ? "PASS" : "FAIL") << "</td><td class=\"r\">" << v_cosine(c)
          << "</td><td class=\"r\">" << d.origins.size() << "</td><td class=\"r\">"
          << d.rules.size() << "</td></tr>\n";
    }
    out << "</table></section>\n";
  }
  for (const auto& d : ds) check_body(out, d, o.top, "check-" + d.precision);
  out << "<footer class=\"sub\"><p>fpguard check: every number is also in <code>--json</code>."
         "</p></footer></body></html>\n";
}

void write_html(std::ostream& out, const analysis::Plan& p, const HtmlText& o) {
  page_head(out, "fpguard plan: " + p.model);
  const auto& generated = p.inputs ? p.inputs->generated : std::vector<inputs::Generated>{};
  std::string qualifier = generated_qualifier(generated);
  if (!qualifier.empty()) qualifier = "<span class=\"qualifiers\">" + esc(qualifier) + "</span> ";
  out << "<section id=\"verdict\"><h1><span class=\"verdict " << (p.meets ? "pass" : "fail")
      << "\">" << (p.meets ? "PLAN" : "NO PLAN MEETS THE TOLERANCE") << "</span>" << qualifier
      << esc(p.model) << " in " << esc(p.precision) << "</h1><p class=\"sub\">" << vc(p.low_nodes)
      << " of " << vc(p.float_nodes) << " floating nodes in " << esc(p.precision) << ", "
      << vc(p.fp32_nodes.size()) << " in float32 (" << p.islands.size() << " island"
      << (p.islands.size() == 1 ? "" : "s") << "), " << vc(p.casts) << " casts, " << vc(p.passes)
      << " checks</p>\n";
  outputs_table(out, p.final_outputs);
  if (const std::string advice = generated_advice(generated); !advice.empty())
    out << "<p class=\"note\">note: " << esc(advice) << "</p>\n";
  out << "</section>\n<section id=\"scaled\"><h2>Exact scale rewrites</h2>\n";
  if (p.scaled.empty()) out << "<p>None.</p>\n";
  for (const auto& s : p.scaled)
    out << "<p><code>" << esc(s.value) << "</code> &times; 2^-" << s.k << " (exact) for the "
        << "overflow at <b>" << esc(s.node) << "</b></p>\n";
  for (const auto& r : p.refused) out << "<p class=\"note\">note: " << esc(describe(r)) << "</p>\n";
  out << "</section>\n<section id=\"islands\"><h2>Float32 islands</h2>\n";
  if (p.islands.empty())
    out << "<p>None: every floating node runs in " << esc(p.precision) << ".</p>\n";
  for (std::size_t i = 0; i < p.islands.size(); ++i) {
    out << "<div class=\"origin\"><b>island " << i + 1
        << "</b>: " << esc(describe(p.islands[i].reason, p.precision)) << "<p>";
    for (std::size_t k = 0; k < p.islands[i].nodes.size(); ++k)
      out << (k ? ", " : "") << "<code>" << esc(p.islands[i].nodes[k]) << "</code>";
    out << "</p></div>\n";
  }
  out << "</section>\n<section id=\"nodes\"><h2>Nodes</h2><table id=\"nodes-table\"><tr><th>#"
         "</th><th>node</th><th>op</th><th>runs in</th><th>why</th></tr>\n";
  const std::set<std::string> fp32(p.fp32_nodes.begin(), p.fp32_nodes.end());
  for (const auto& n : p.final_check.nodes) {
    if (n.precision == "none") continue;
    const bool kept = fp32.count(n.name) > 0;
    auto why = p.reasons.find(n.name);
    // Nodes neither emulated nor kept move data (or are constants): no precision of their own.
    const std::string runs = kept || n.emulated        ? n.precision
                             : n.op_type == "Constant" ? "constant"
                                                       : "moves data";
    out << "<tr><td>" << n.index << "</td><td>" << esc(n.name) << "</td><td>" << esc(n.op_type)
        << "</td><td class=\"" << (kept ? "bad" : "") << "\">" << esc(runs) << "</td><td>"
        << (why != p.reasons.end() ? esc(describe(why->second, p.precision)) : "")
        << "</td></tr>\n";
  }
  out << "</table></section>\n";
  if (!p.final_check.nodes.empty()) {
    out << "<section id=\"final\"><h2>The final plan, checked</h2>\n";
    check_body(out, p.final_check, o.top, "final-check");
    out << "</section>\n";
  }
  out << "<footer class=\"sub\"><p>TensorRT 10: <code>trtexec " << esc(trtexec_flags(p))
      << "</code></p></footer></body></html>\n";
}

namespace {

void verdict_cell(std::ostream& out, Verdict verdict) {
  out << "<td class=\"" << (verdict == Verdict::ok ? "ok" : "bad") << "\">" << to_string(verdict)
      << "</td>";
}

// The scaled formats of one tensor (docs/inspect.md): what their shared scales did.
void scaled_table(std::ostream& out, const std::vector<ScaledFormatStats>& scaled) {
  out << "<table class=\"scaled-table\"><tr><th>scaled format</th><th>verdict</th>"
      << "<th class=\"r\">axis</th><th class=\"r\">blocks</th><th class=\"r\">saturated "
      << "blocks</th><th class=\"r\">flushed values</th><th class=\"r\">blocks with a flushed "
      << "value</th><th class=\"r\">underflow</th><th class=\"r\">widest block</th>"
      << "<th class=\"r\">one scale holds</th><th class=\"r\">max rel error</th></tr>\n";
  for (const auto& f : scaled) {
    out << "<tr><td>" << esc(f.format.name) << "</td>";
    verdict_cell(out, f.verdict);
    out << "<td class=\"r\">" << f.axis << "</td><td class=\"r\">" << vc(f.blocks)
        << "</td><td class=\"r\">" << vc(f.saturated_blocks) << "</td><td class=\"r\">"
        << vc(f.flushed) << "</td><td class=\"r\">" << vc(f.flushed_blocks)
        << "</td><td class=\"r\">" << vc(f.underflow) << "</td><td class=\"r\">"
        << esc(bits(f.max_block_range_bits)) << "</td><td class=\"r\">"
        << esc(bits(f.element_range_bits)) << "</td><td class=\"r\">" << v(f.max_rel_error)
        << "</td></tr>\n";
  }
  out << "</table>\n";
}

}  // namespace

void write_html(std::ostream& out, const std::vector<InspectedTensor>& ts, const HtmlText&) {
  page_head(out, "fpguard inspect");
  out << "<section id=\"summary\"><h1>fpguard inspect: " << ts.size() << " tensor"
      << (ts.size() == 1 ? "" : "s") << "</h1><table id=\"summary-table\"><tr><th>tensor</th>"
      << "<th>dtype</th><th>shape</th><th class=\"r\">absmax</th>";
  if (!ts.empty()) {
    for (const auto& f : ts.front().stats.formats) out << "<th>" << esc(f.format.name) << "</th>";
    for (const auto& f : ts.front().scaled) out << "<th>" << esc(f.format.name) << "</th>";
  }
  out << "</tr>\n";
  auto shape_text = [](const std::vector<std::int64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  };
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    out << "<tr><td><a href=\"#tensor-" << i << "\">" << esc(t.name) << "</a></td><td>"
        << to_string(t.dtype) << "</td><td>" << shape_text(t.shape) << "</td><td class=\"r\">"
        << v(t.stats.tensor.absmax) << "</td>";
    for (const auto& f : t.stats.formats) verdict_cell(out, f.verdict);
    for (const auto& f : t.scaled) verdict_cell(out, f.verdict);
    out << "</tr>\n";
  }
  out << "</table></section>\n";
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    const TensorStats& s = t.stats.tensor;
    out << "<section class=\"tensor\" id=\"tensor-" << i << "\"><h2>" << esc(t.name) << " <span "
        << "class=\"sub\">" << to_string(t.dtype) << " " << shape_text(t.shape) << "</span></h2>"
        << "<table class=\"stats-table\"><tr><th class=\"r\">count</th><th class=\"r\">min</th>"
        << "<th class=\"r\">max</th><th class=\"r\">absmax</th><th class=\"r\">smallest |x| &gt; 0"
        << "</th><th class=\"r\">mean</th><th class=\"r\">std</th><th class=\"r\">NaN</th>"
        << "<th class=\"r\">inf</th><th class=\"r\">zeros</th></tr><tr><td class=\"r\">"
        << vc(s.count) << "</td><td class=\"r\">" << v(s.min) << "</td><td class=\"r\">" << v(s.max)
        << "</td><td class=\"r\">" << v(s.absmax) << "</td><td class=\"r\">" << v(s.min_abs_nonzero)
        << "</td><td class=\"r\">" << v(s.mean) << "</td><td class=\"r\">" << v(s.std)
        << "</td><td class=\"r\">" << vc(s.nan) << "</td><td class=\"r\">"
        << vc(s.posinf + s.neginf) << "</td><td class=\"r\">" << vc(s.zeros)
        << "</td></tr></table>\n<table class=\"formats-table\"><tr><th>format</th><th>verdict"
        << "</th><th class=\"r\">overflow</th><th class=\"r\">underflow</th><th class=\"r\">"
        << "subnormal</th><th class=\"r\">precision loss</th><th class=\"r\">headroom</th>"
        << "<th class=\"r\">max rel error</th></tr>\n";
    for (const auto& f : t.stats.formats)
      out << "<tr><td>" << esc(f.format.name) << "</td><td class=\""
          << (f.verdict == Verdict::ok ? "ok" : "bad") << "\">" << to_string(f.verdict)
          << "</td><td class=\"r\">" << vc(f.overflow) << "</td><td class=\"r\">" << vc(f.underflow)
          << "</td><td class=\"r\">" << vc(f.subnormal) << "</td><td class=\"r\">"
          << vc(f.precision_loss) << "</td><td class=\"r\">"
          << v(f.headroom_bits, bits(f.headroom_bits)) << "</td><td class=\"r\">"
          << v(f.max_rel_error) << "</td></tr>\n";
    out << "</table>\n";
    if (!t.scaled.empty()) scaled_table(out, t.scaled);
    for (std::size_t k = 0; k < t.stats.formats.size(); ++k) {
      out << "<h3>exponents against " << esc(t.stats.formats[k].format.name) << "</h3>\n";
      histogram_chart(out, s.exponent_histogram, t.name, t.stats.formats[k].format, i * 16 + k);
    }
    out << "</section>\n";
  }
  out << "<footer class=\"sub\"><p>fpguard inspect: every number is also in <code>--json</code>."
         "</p></footer></body></html>\n";
}

}  // namespace fpguard::report
