// The sentences: every finding of the analysis layers worded from its data, in one place,
// so the terminal, the JSON "message" fields and the HTML say the same thing.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "fpguard/error.hpp"
#include "fpguard/format.hpp"
#include "fpguard/report.hpp"
#include "node_numbers.hpp"

namespace fpguard::report {

namespace {

using analysis::Cause;
using analysis::FixKind;

std::string quoted(const std::string& name) {
  return "`" + name + "`";
}

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The format of a finding, or float16 when the name is not one (a hand-edited JSON).
// A count held in a double (a reduction depth): as an integer, clamped to what it can be.
std::uint64_t whole(double x) {
  if (!(x > 0)) return 0;
  return x >= 1.8e19 ? std::uint64_t{18000000000000000000u} : static_cast<std::uint64_t>(x);
}

// A scaled precision (a node quantizing into it) is known by its element format.
Format format_of(const std::string& name) {
  if (auto f = find_format(name)) return *f;
  try {
    if (auto s = find_scaled_format(name)) {
      Format e = s->element;
      e.name = s->name;
      return e;
    }
  } catch (const Error&) {  // a malformed custom spelling (a hand-edited JSON)
  }
  return parse_format("float16");
}

std::string overflow_what(const analysis::Origin& o, const Format& f) {
  switch (o.cause) {
    case Cause::boundary:
      return fmt::format(
          "reads {} from float32 nodes with values up to {}: rounding them to {} overflows",
          quoted(o.related), num(o.input_absmax), f.name);
    case Cause::square:
      return fmt::format("squares values up to {}: {} > {} max {}", num(o.input_absmax),
                         num(o.absmax), f.name, num(f.max()));
    case Cause::exponential:
      return fmt::format("exponentiates values up to {}: {} > {} max {}", num(o.input_absmax),
                         num(o.absmax), f.name, num(f.max()));
    case Cause::computes:
      return fmt::format("computes values up to {} from inputs up to {}: {} > {} max {}",
                         num(o.absmax), num(o.input_absmax), num(o.absmax), f.name, num(f.max()));
    default:
      return fmt::format("rounds its results past {} max {} (reference values up to {})", f.name,
                         num(f.max()), num(o.absmax));
  }
}

std::string feeds(const analysis::Origin& o) {
  std::string chain;
  for (const auto& [op, node] : o.consumers)
    chain += (chain.empty() ? "" : " -> ") + op + " " + quoted(node);
  return chain.empty() ? "" : "; its consumers: " + chain;
}

std::string value_origin(const analysis::Origin& o, const Format& f) {
  if (o.cause == Cause::input)
    return fmt::format("graph input {} has values up to {}, beyond {} max {}", quoted(o.node),
                       num(o.absmax), f.name, num(f.max()));
  // What the worst value becomes when the weights are converted.
  const double worst = o.absmax;
  const std::string becomes = f.has_inf() && !o.saturates   ? (worst < 0 ? "-inf" : "inf")
                              : f.has_nan() && !o.saturates ? "NaN"
                                                            : "+-" + num(f.max()) + " (saturated)";
  return fmt::format("{} {} holds {} value{} beyond {} max {} (worst {}), which become{} {}; {}",
                     o.op_type, quoted(o.node), count(o.affected), o.affected > 1 ? "s" : "",
                     f.name, num(f.max()), num(worst), o.affected > 1 ? "" : "s", becomes,
                     o.absorbed ? "the outputs stay finite: its consumers absorb it (harmless here)"
                                : "the outputs are not finite where the reference is");
}

// Whether a scaling's outputs must be rescaled: the words that end a scale fix.
std::string rescale(const analysis::Fix& x) {
  const int a = x.exponent;
  if (!x.undo)
    return fmt::format(
        "the outputs need no rescaling: the normalisation it feeds (x * rsqrt(mean(x^2) + eps)) "
        "is unchanged by scaling x (eps becomes eps * 2^{})",
        2 * a);
  return fmt::format(
      "the outputs must be rescaled: multiply its result by 2^{} where the values are back in "
      "float32",
      -a * x.degree);
}

}  // namespace

// ", first at iteration 3" for a body node that first overflowed in that iteration of its
// loop ("iterations 2, 0" when loops nest, outermost first).
std::string at_iteration(const std::vector<std::size_t>& its) {
  if (its.empty()) return "";
  std::vector<std::string> parts;
  for (const auto i : its) parts.push_back(std::to_string(i));
  return fmt::format(", first at iteration{} {}{}", its.size() > 1 ? "s" : "", join(parts, ", "),
                     its.size() > 1 ? " (outermost loop first)" : "");
}

namespace {

// "3 of 12 blocks (25%)".
std::string share(std::uint64_t part, std::uint64_t whole, const char* noun) {
  const double pct = whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0;
  return fmt::format("{} of {} {} ({}%)", count(part), count(whole), noun,
                     num(std::round(pct * 10) / 10));
}

// The scaled-precision origins: what the scales did to one of a GEMM's operands.
std::string scaled_origin(const analysis::Origin& o, const std::string& who) {
  const std::string operand =
      fmt::format("its operand {} (input {}) in {}", quoted(o.related), o.operand, o.format);
  switch (o.kind) {
    case analysis::OriginKind::block_underflow:
      return fmt::format(
          "{}: in {} the block scale an outlier set flushes its neighbours to zero: {} "
          "flushed, in {}; relative RMS error of its own {}{}",
          who, operand, share(o.affected, o.total, "non-zero values"),
          share(o.blocks_affected, o.blocks, "blocks"), num(o.local_error), feeds(o));
    case analysis::OriginKind::block_saturation:
      return fmt::format(
          "{}: in {} a saturated scale clips values far past rounding: {} clipped, in {}; "
          "relative RMS error of its own {}{}",
          who, operand, share(o.affected, o.total, "non-zero values"),
          share(o.blocks_affected, o.blocks, "blocks"), num(o.local_error), feeds(o));
    default:
      return fmt::format(
          "{}: in {} the amax rare outliers set puts {} into the element format's subnormals or "
          "to zero; relative RMS error of its own {}{}",
          who, operand, share(o.affected, o.total, "non-zero values"), num(o.local_error),
          feeds(o));
  }
}

}  // namespace

std::string describe(const analysis::Origin& o) {
  const Format f = format_of(o.format);
  const std::string who =
      fmt::format("{} ({}{})", quoted(o.node), o.op_type, at_iteration(o.iteration));
  switch (o.kind) {
    case analysis::OriginKind::overflow:
      if (o.cause == Cause::constant || o.cause == Cause::input) return value_origin(o, f);
      return fmt::format("{} {} ({} of {} values {} in its local run){}", who, overflow_what(o, f),
                         count(o.affected), count(o.total),
                         o.saturates ? "saturate" : "become inf/NaN", feeds(o));
    case analysis::OriginKind::nan: {
      const std::string cause =
          o.cause == Cause::zero_divisor
              ? fmt::format("its divisor {} has values down to {}, which round to 0 in {}: 0/0",
                            quoted(o.related), num(o.min_nonzero), f.name)
              : fmt::format("inf - inf, 0 * inf, 0/0 or a root/log of a negative value in {}",
                            f.name);
      return fmt::format(
          "{} produces NaN in {} of {} values where the reference is finite (its local run): "
          "{}{}",
          who, count(o.affected), count(o.total), cause, feeds(o));
    }
    case analysis::OriginKind::underflow:
      return fmt::format(
          "{} flushes {} of {} non-zero values to zero in {} in its local run (reference values "
          "down to {}, {} smallest subnormal {}): relative RMS error {}{}",
          who, count(o.affected), count(o.total), f.name, num(o.min_nonzero), f.name,
          num(f.smallest_subnormal()), num(o.local_error), feeds(o));
    case analysis::OriginKind::accuracy: {
      const double u = std::ldexp(1.0, -f.precision_bits());
      return fmt::format(
          "{} adds a relative RMS error of {} on its own (its inputs carry {}; {} unit roundoff "
          "{}); alone in {}, it gives the outputs a relative RMS error of {} ({}% of the whole {} "
          "run's {})",
          who, num(o.local_error), num(o.input_error), f.name, num(u), f.name, num(o.contribution),
          num(std::round(100 * o.contribution / o.total_error)), f.name, num(o.total_error));
    }
    case analysis::OriginKind::block_underflow:
    case analysis::OriginKind::block_saturation:
    case analysis::OriginKind::scale_underflow:
      return scaled_origin(o, who);
  }
  return "";
}

namespace {

// A scaled format instead: what it changes, and the flag (it applies to the whole model).
std::string scaled_format_fix(const analysis::Fix& x) {
  std::optional<ScaledFormat> f;
  try {
    f = find_scaled_format(x.format);
  } catch (const Error&) {  // a malformed custom spelling (a hand-edited JSON)
  }
  std::string what = "quantize its operands into " + x.format;
  if (f && f->rule == ScaleRule::two_level)
    what = fmt::format("use NVFP4's finer scale ({}): blocks of {} under a {} scale", x.format,
                       f->block_size, f->scale.name);
  else if (f && f->scope == ScaleScope::block)
    what = fmt::format(
        "use blocks of {} ({}): each block's scale follows its own values, so an outlier "
        "reaches only its {} neighbours",
        f->block_size, x.format, f->block_size - 1);
  return fmt::format("{} (--precision {}, for the whole model)", what, x.format);
}

}  // namespace

std::string describe(const analysis::Fix& x) {
  switch (x.kind) {
    case FixKind::keep_fp32:
      return fmt::format(
          "keep {} in float32 (--keep-fp32 {})",
          x.nodes.size() == 1 ? "this node" : "these " + std::to_string(x.nodes.size()) + " nodes",
          join(x.nodes));
    case FixKind::format: {
      if (x.format == "bfloat16")
        return fmt::format("run it in bfloat16 instead (max {}, 8 significant bits)",
                           num(parse_format("bfloat16").max()));
      const Format f = format_of(x.format);
      return fmt::format("run it in {} ({} significant bits) instead", f.name, f.precision_bits());
    }
    case FixKind::replace_value:
      return fmt::format(
          "use a value inside the range, e.g. {} instead of {} (a mask needs only to be very "
          "negative)",
          num(x.replacement), num(x.value_seen));
    case FixKind::guard:
      return fmt::format(
          "make the divisor/argument safe in {}: an epsilon of at least {} (its smallest normal), "
          "or clamp",
          x.format, num(x.replacement));
    case FixKind::scaled_format:
      return scaled_format_fix(x);
    case FixKind::keep_unscaled:
      return fmt::format(
          "run {} unscaled in {}, its operands rounded to {} (--keep-unscaled {})",
          x.nodes.size() == 1 ? "this node" : "these " + std::to_string(x.nodes.size()) + " nodes",
          x.format, x.format, join(x.nodes));
    case FixKind::scale:
      break;
  }
  const int a = x.exponent;
  const std::string factor = fmt::format("2^{} = {}", a, num(std::ldexp(1.0, a)));
  if (x.before_model)
    return fmt::format(
        "scale the input by {} (exact) before the model; whether the outputs must then be "
        "rescaled depends on the model (`fpguard plan` finds an exact rewrite that leaves them "
        "unchanged)",
        factor);
  if (a > 0)  // an underflow: scale up
    return fmt::format("scale up by {} (exact) before this node: the largest value becomes {}; {}",
                       factor, num(x.replacement), rescale(x));
  const std::string node = x.nodes.empty() ? "?" : x.nodes.front();
  return fmt::format(
      "scale the input {} of {} by {} (exact in any binary format): its largest result drops "
      "to {}, at most half of {} max; {}",
      quoted(x.value.empty() ? "?" : x.value), quoted(node), factor, num(x.replacement), x.format,
      rescale(x));
}

namespace {

// The rules for models another tool converted; "" for other ids.
std::string describe_converted(const analysis::RuleFinding& r) {
  auto type = [&](std::size_t i) {
    return i < r.types.size() && !r.types[i].empty() ? r.types[i] : std::string("?");
  };
  if (r.id == "cast-type")
    return fmt::format("casts {} to {} but the model declares it {}", quoted(r.tensor), type(0),
                       type(1));
  if (r.id == "cast-chain")
    return fmt::format("casts {}, already a Cast's result, again: {} -> {} -> {}{}",
                       quoted(r.tensor), type(0), type(1), type(2),
                       r.count ? " (a rounding round trip)" : " (redundant)");
  if (r.id == "schema-type")
    return fmt::format(
        "{} receives {} in {}, a type its ONNX schema at opset {} does not accept; a runtime "
        "refuses the model or has no kernel for it",
        r.op_type, type(0), quoted(r.tensor), count(whole(r.parameter)));
  if (r.id == "clipped-initializer")
    return fmt::format(
        "{} of {} values clipped to +-{} by the conversion (the original reaches {})",
        count(r.count), count(r.total), num(r.parameter), num(r.observed));
  if (r.id == "floored-initializer")
    return fmt::format(
        "{} of {} small values raised to +-{} by the conversion (the original goes down to {})",
        count(r.count), count(r.total), num(r.parameter), num(r.observed));
  return "";
}

}  // namespace

std::string describe(const analysis::RuleFinding& r) {
  const Format f = format_of(r.format);
  const std::string& id = r.id;
  if (id == "constant-overflow")
    return fmt::format("{} of {} values overflow {} (worst {}, max {})", count(r.count),
                       count(r.total), f.name, num(r.parameter), num(r.limit));
  if (id == "constant-underflow")
    return fmt::format(
        "{} of {} non-zero values flush to zero in {} (smallest {}, {} smallest subnormal {})",
        count(r.count), count(r.total), f.name, num(r.parameter), f.name, num(r.limit));
  if (id == "pow")
    return fmt::format("Pow(x, {}) overflows {} once |x| > {}; x reaches {} here", num(r.parameter),
                       f.name, num(r.limit), num(r.observed));
  if (id == "exp")
    return fmt::format("Exp overflows {} for x > {}; |x| reaches {} here", f.name, num(r.limit),
                       num(r.observed));
  if (id == "log")
    return fmt::format(
        "Log of values below {} (which flush to zero in {}) is -inf; its input goes down to {} "
        "here",
        num(r.limit), f.name, num(r.observed));
  if (id == "root-after-reduction")
    return fmt::format(
        "{} by (the root of) a reduction, a variance or mean square: a result below {} flushes "
        "to zero in {} and the quotient becomes inf; it goes down to {} here",
        r.op_type, num(r.limit), f.name, num(r.observed));
  if (id == "sum-of-squares")
    return fmt::format("{} squares before summing: values above {} overflow {}; they reach {} here",
                       r.op_type, num(r.limit), f.name, num(r.observed));
  if (id == "long-reduction")
    return fmt::format(
        "{} combines {} values: a sum can exceed {} max even when every term fits, and "
        "accumulated in {} it stops growing past 2^{} terms",
        r.op_type, count(whole(r.observed)), f.name, f.name, f.precision_bits());
  if (id == "softmax-without-max")
    return fmt::format(
        "a softmax written as Exp / ReduceSum without subtracting the maximum first: Exp "
        "overflows for logits above {}{}",
        num(r.limit), r.observed > 0 ? "; they reach " + num(r.observed) + " here" : "");
  if (id == "norm-as-primitives")
    return fmt::format(
        "a {} written as primitive ops squares the activations in {}: it overflows once they "
        "exceed {} (they reach {} here); a fused LayerNormalization or keeping the statistics in "
        "float32 avoids it",
        r.centred ? "LayerNorm" : "RMSNorm", f.name, num(r.limit), num(r.observed));
  if (id == "large-k")
    return fmt::format(
        "{} sums {} products per output: a kernel accumulating in {} (2^{} significant bits) "
        "loses whole terms; make sure it accumulates in float32",
        r.op_type, count(whole(r.observed)), f.name, f.precision_bits());
  if (id == "large-range")
    return fmt::format(
        "{} reaches {}: {} spaces values there {} apart (ULP), so small differences between "
        "large values are lost",
        r.tensor, num(r.observed), f.name, num(r.parameter));
  if (const std::string converted = describe_converted(r); !converted.empty()) return converted;
  return fmt::format("{} (observed {}, limit {})", id, num(r.observed), num(r.limit));
}

std::string describe(const analysis::Note& n, const analysis::Diagnosis& d) {
  switch (n.kind) {
    case analysis::NoteKind::mixed_storage:
      return fmt::format(
          "the model already stores values in 16 bits: {}the reference is its float32 twin "
          "(every 16-bit value held in float32)",
          n.count == 0 ? ""
                       : fmt::format("its {} float32 compute node{} float32, and ", n.count,
                                     n.count == 1 ? " stays" : "s stay"));
    case analysis::NoteKind::no_float_node:
      return "the model has no floating-point compute node to run in " + d.precision +
             ": nothing to check";
    case analysis::NoteKind::generated:
      return n.text;
  }
  return n.text;
}

namespace {

// "uniform [-1, 1]", "constant 0", "normal (mean 0, std 1)".
std::string generator(const inputs::Generator& g) {
  if (g.distribution == "normal")
    return fmt::format("normal (mean {}, std {})", num(g.a), num(g.b));
  if (g.a == g.b) return "constant " + num(g.a);
  return fmt::format("{} [{}, {}]", g.distribution, num(g.a), num(g.b));
}

// "a, b, c, d, e and 3 more".
std::string names_list(const std::vector<std::string>& names, std::size_t shown = 5) {
  if (names.size() <= shown) return join(names, ", ");
  const std::vector<std::string> head(names.begin(), names.begin() + shown);
  return fmt::format("{} and {} more", join(head, ", "), names.size() - shown);
}

}  // namespace

std::string generated_qualifier(const std::vector<inputs::Generated>& generated) {
  if (generated.empty()) return "";
  // Inputs drawn from the same generator are named together.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& g : generated) {
    const std::string spec = generator(g.generator);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& grp) { return grp.first == spec; });
    if (it == groups.end()) it = groups.insert(groups.end(), {spec, {}});
    it->second.push_back(g.name);
  }
  std::vector<std::string> parts;
  for (const auto& [spec, names] : groups)
    parts.push_back(fmt::format("{} {}", names_list(names), spec));
  return fmt::format("(generated inputs: {}; ranges unverified)", join(parts, "; "));
}

namespace {

std::string absorbed_qualifier(const analysis::Diagnosis& d) {
  using analysis::OriginKind;
  std::map<OriginKind, std::vector<std::string>> by_kind;  // overflow, nan, underflow order
  for (const auto& name : d.absorbed) {
    const auto o = std::find_if(d.origins.begin(), d.origins.end(), [&](const auto& x) {
      return x.node == name && x.kind != OriginKind::accuracy;
    });
    if (o != d.origins.end()) by_kind[o->kind].push_back(name);
  }
  std::vector<std::string> parts;
  for (const auto& [kind, names] : by_kind) {
    const std::string noun =
        kind == OriginKind::nan ? "NaN" : std::string(analysis::to_string(kind));
    const std::string failed =
        d.fail_on.count(kind) ? fmt::format(", failed by --fail-on {}", analysis::to_string(kind))
                              : "";
    parts.push_back(fmt::format("{} {}{} absorbed{}: {}", names.size(), noun,
                                names.size() == 1 ? "" : "s", failed, names_list(names)));
  }
  return parts.empty() ? "" : fmt::format("({})", join(parts, "; "));
}

}  // namespace

std::string describe(const inputs::Generated& g) {
  return g.name + " " + generator(g.generator);
}

std::string verdict_qualifiers(const analysis::Diagnosis& d) {
  const std::string gen = generated_qualifier(d.generated), abs = absorbed_qualifier(d);
  return gen + (gen.empty() || abs.empty() ? "" : " ") + abs;
}

std::string generated_advice(const std::vector<inputs::Generated>& generated) {
  if (generated.empty()) return "";
  std::vector<std::string> names;
  for (const auto& g : generated) names.push_back(g.name);
  return fmt::format(
      "{} {} generated, not read from data: ranges, and so overflows, depend on the inputs; "
      "give real ones with --input/--inputs (--require-inputs refuses to run without them)",
      names_list(names), names.size() == 1 ? "was" : "were");
}

namespace {

// Adds `names` to `into` once each; then sorts it by topological position (unknown last).
void merge_in_order(std::vector<std::string>& into, const std::vector<std::string>& names,
                    const std::map<std::string, std::size_t>& position) {
  for (const auto& n : names)
    if (std::find(into.begin(), into.end(), n) == into.end()) into.push_back(n);
  const auto at = [&](const std::string& n) {
    const auto it = position.find(n);
    return it == position.end() ? position.size() : it->second;
  };
  std::stable_sort(into.begin(), into.end(),
                   [&](const std::string& a, const std::string& b) { return at(a) < at(b); });
}

// "`v` by 2^-3 for `/ln1/Pow`", "the input `x` by 2^-2 before the model".
std::string scaling(const analysis::Fix& f) {
  if (f.before_model)
    return fmt::format("the input {} by 2^{} before the model", quoted(f.value), f.exponent);
  const std::string node = f.nodes.empty() ? "?" : f.nodes.front();
  if (f.exponent > 0) return fmt::format("up by 2^{} before {}", f.exponent, quoted(node));
  return fmt::format("{} by 2^{} for {}", quoted(f.value), f.exponent, quoted(node));
}

}  // namespace

CombinedFix combine_fixes(const analysis::Diagnosis& d) {
  std::map<std::string, std::size_t> position;
  for (std::size_t i = 0; i < d.nodes.size(); ++i) position.emplace(d.nodes[i].name, i);
  CombinedFix c;
  c.origins = d.origins.size();
  for (const auto& o : d.origins) {
    merge_in_order(c.keep_fp32, o.keep_fp32, position);
    const auto scale = std::find_if(o.fixes.begin(), o.fixes.end(), [](const analysis::Fix& f) {
      return f.kind == analysis::FixKind::scale;
    });
    if (scale != o.fixes.end())
      c.scalings.push_back(*scale);
    else
      merge_in_order(c.keep_rest, o.keep_fp32, position);
  }
  return c;
}

std::string describe(const CombinedFix& c) {
  if (c.origins < 2) return "";
  std::string s =
      fmt::format("fix all {} at once: keep {} node{} in float32 (--keep-fp32 {})", c.origins,
                  c.keep_fp32.size(), c.keep_fp32.size() == 1 ? "" : "s", join(c.keep_fp32));
  if (!c.scalings.empty()) {
    std::vector<std::string> parts;
    bool undo = false, unknown = false;
    for (const auto& f : c.scalings) {
      parts.push_back(scaling(f));
      undo = undo || (f.undo && !f.before_model);
      unknown = unknown || f.before_model;
    }
    s += fmt::format("; or scale {} (exact)", join(parts, ", "));
    s += undo      ? ", then rescale the outputs as each fix says"
         : unknown ? ""
                   : ", the outputs need no rescaling";
    if (!c.keep_rest.empty())
      s += fmt::format(", and keep the rest in float32 (--keep-fp32 {})", join(c.keep_rest));
  }
  return s +
         "; `fpguard plan` (same model, inputs and --precision) finds the fewest float32 nodes, "
         "with the exact scalings, and proves them";
}

std::string describe(const analysis::FirstTrouble& f, const analysis::Diagnosis& d) {
  const std::string what =
      f.nonfinite
          ? "to become inf/NaN where the reference is finite"
          : fmt::format("to leave the tolerance ({})",
                        std::isnan(f.cosine)
                            ? "cosine n/a"
                            : fmt::format("cosine {} < {}", fixed(f.cosine, 6), d.min_cosine));
  const std::string from =
      f.node.empty() ? "a graph input" : fmt::format("from {} ({})", quoted(f.node), f.op_type);
  const std::string why =
      f.node.empty() ? ""
      : f.producer_emulated
          ? fmt::format(", whose own run in {} (its local run) stays sound", d.precision)
          : ", which runs in float32: what it reads carries the trouble";
  return fmt::format("no origin found: the first tensor {} is {}, {}{}", what, quoted(f.tensor),
                     from, why);
}

namespace {
// "a tensor", "a sequence of 3", "an empty optional".
std::string form_text(const analysis::ValueForm& f) {
  if (f.kind == ValueKind::sequence) return fmt::format("a sequence of {}", f.length);
  return f.kind == ValueKind::none ? "an empty optional" : "a tensor";
}
}  // namespace

std::string describe(const analysis::OutputMismatch& m, std::uint64_t sets) {
  const bool longer =
      m.reference.kind == ValueKind::sequence && m.emulated.kind == ValueKind::sequence;
  return fmt::format(
      "the emulated run gives {} where the reference gives {}{} (input set {}; {} "
      "set{} in all)",
      form_text(m.emulated), form_text(m.reference),
      longer ? ": elements past the shorter are not compared" : "", m.set, sets,
      sets == 1 ? "" : "s");
}

std::string next_steps(const analysis::Diagnosis& d) {
  if (d.pass || !d.origins.empty()) return "";
  if (d.first_trouble && d.first_trouble->nonfinite) return describe(*d.first_trouble, d);
  if (const auto& f = d.first_trouble)  // an output of another kind or length
    for (const auto& o : d.outputs)
      if (o.name == f->tensor && o.mismatch)
        return fmt::format(
            "no origin found: {} differs in kind or length{}: {}", quoted(o.name),
            f->node.empty() ? "" : fmt::format(" (from {} ({}))", quoted(f->node), f->op_type),
            describe(*o.mismatch, o.mismatched_sets));
  std::vector<std::string> top;
  for (const auto& r : detail::worst_nodes(d, 3))
    if (r.x.damage > 0)
      top.push_back(fmt::format("{} ({})", quoted(r.node->name), detail::damage_cell(r.x.damage)));
  std::string s =
      "no single node starts the failure (no overflow, NaN or underflow, and no node's own "
      "error stands out): the error is spread over many nodes";
  if (const auto& f = d.first_trouble; f && !f->node.empty())
    s += fmt::format("; it shows first in {} (from {})", quoted(f->tensor), quoted(f->node));
  if (!top.empty())
    s += fmt::format("; the most damaging (worst nodes below): {}", join(top, ", "));
  return s +
         "; next: `fpguard plan` (same model, inputs and --precision) keeps the fewest nodes in "
         "float32 until the outputs pass, and proves it";
}

std::string minor_findings(std::size_t minor, bool after_others) {
  return fmt::format(
      "{}{}{} finding{} below the threshold (a margin of 2^{} or more, under {}% of a tensor's "
      "values and of its L2 norm); --json has all",
      after_others ? "and " : "", minor, after_others ? " more" : "", minor == 1 ? "" : "s",
      num(analysis::kRuleMarginBits), num(100 * analysis::kRuleShare));
}

std::string describe(const analysis::Reason& r, const std::string& precision) {
  switch (r.kind) {
    case analysis::KeepReason::forced:
      return "kept by --keep-fp32";
    case analysis::KeepReason::origin:
      return fmt::format("{} origin {}", analysis::to_string(r.origin_kind), r.origin);
    case analysis::KeepReason::reads_origin:
      return fmt::format("{} origin {} (reads its out-of-range values)",
                         analysis::to_string(r.origin_kind), r.origin);
    case analysis::KeepReason::accuracy:
      return fmt::format("accuracy: alone in {} it gives the outputs a relative error of {}",
                         precision, num(r.error));
    case analysis::KeepReason::largest_error:
      return fmt::format("largest local error ({} relative RMS)", num(r.error));
  }
  return "";
}

std::string describe(const analysis::ScaleRefusal& r) {
  switch (r.kind) {
    case analysis::RefusalKind::no_rewrite:
      return "no exact scaling of '" + r.value + "' for the overflow at " + r.node + ": " + r.why;
    case analysis::RefusalKind::changes_function:
      return fmt::format(
          "scaling '{}' by 2^-{} changes the float32 outputs (relative RMS {}): not used", r.value,
          r.k, num(r.error));
    case analysis::RefusalKind::still_overflows:
      return fmt::format("scaling '{}' by 2^-{} leaves {} overflowing: not used", r.value, r.k,
                         r.node);
  }
  return "";
}

std::string describe(const analysis::PlanStep& s) {
  switch (s.kind) {
    case analysis::PlanStepKind::as_is:
      return "the model as it is";
    case analysis::PlanStepKind::scaling:
      return "scaling the input of " + s.node;
    case analysis::PlanStepKind::after_scaling:
      return "after scaling";
    case analysis::PlanStepKind::growing:
      return fmt::format("{} node{} in float32", s.fp32, s.fp32 == 1 ? "" : "s");
    case analysis::PlanStepKind::pruning:
      return "without " + s.node;
  }
  return "";
}

}  // namespace fpguard::report
