// The cluster keys that `megatron submit` writes into a batch script: each value must read
// back as the one word (or line) it was, so nothing in a recipe can change the script's shape.
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <regex>
#include <sstream>

#include "core/printable.hpp"
#include "recipe/checks.hpp"

namespace megatron::recipe {
namespace {

// What a name-like value may not hold: it goes on an #SBATCH line, where sbatch splits words at
// spaces and a quote or `$` would read as something else in a copy pasted into a shell.
std::optional<std::string> bad_name_character(const std::string& value) {
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isspace(c)) return std::string("a space");
    if (std::iscntrl(c)) return std::string("a control character");
    if (std::string_view("\"'`$\\;#").find(ch) != std::string_view::npos)
      return fmt::format("'{}'", ch);
  }
  return std::nullopt;
}

void check_name(const Locator& where, const std::string& path, const std::optional<std::string>& value) {
  if (!value) return;
  if (value->empty())
    fail_at(where.at(path), path + " is empty: give a value or remove the key");
  if (value->size() > 256)
    fail_at(where.at(path), fmt::format("{} is {} characters long; Slurm values are short names",
                                        path, value->size()));
  if (auto bad = bad_name_character(*value))
    fail_at(where.at(path), fmt::format("{} '{}' holds {}, which a Slurm {} cannot: write the "
                                        "name as Slurm shows it (sinfo, sacctmgr)",
                                        path, printable(*value), *bad, path.substr(8)));
}

// One option per entry: a line break would start a new line of the script.
void check_options(const Locator& where, const std::string& path, const std::vector<std::string>& options) {
  for (const std::string& option : options) {
    if (option.empty() || option.front() != '-')
      fail_at(where.at(path), fmt::format("{} entry '{}' is not an option: write it as on the "
                                          "command line, e.g. --reservation=big",
                                          path, printable(option)));
    for (const char ch : option) {
      if (std::iscntrl(static_cast<unsigned char>(ch)))
        fail_at(where.at(path), fmt::format("{} entry '{}' holds a line break or control "
                                            "character: give one option per entry",
                                            path, printable(option)));
    }
  }
}

constexpr std::array kMailTypes{"NONE",          "BEGIN",         "END",           "FAIL",
                                "REQUEUE",       "ALL",           "INVALID_DEPEND", "STAGE_OUT",
                                "TIME_LIMIT",    "TIME_LIMIT_90", "TIME_LIMIT_80",  "TIME_LIMIT_50",
                                "ARRAY_TASKS"};

void check_mail_type(const Locator& where, const std::optional<std::string>& value) {
  if (!value) return;
  std::stringstream in(*value);
  for (std::string type; std::getline(in, type, ',');) {
    bool known = false;
    for (const char* t : kMailTypes) known = known || type == t;
    if (!known)
      fail_at(where.at("cluster.mail_type"),
              fmt::format("cluster.mail_type: '{}' is not a Slurm mail type: use a "
                          "comma-separated list of NONE, BEGIN, END, FAIL, REQUEUE, ALL, "
                          "TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50",
                          printable(type)));
  }
}

}  // namespace

std::optional<int64_t> slurm_time_seconds(const std::string& text) {
  // MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (sbatch --time); each part at most 9 digits.
  static const std::regex format(
      R"((?:(\d{1,9})-)?(\d{1,9})(?::(\d{1,9}))?(?::(\d{1,9}))?)");
  std::smatch m;
  if (text.size() > 64 || !std::regex_match(text, m, format)) return std::nullopt;
  const auto part = [&](int i) { return m[i].matched ? std::stoll(m[i].str()) : 0LL; };
  const bool days = m[1].matched;
  const int parts = 1 + int(m[3].matched) + int(m[4].matched);
  if (days) {  // D-HH[:MM[:SS]]
    return ((part(1) * 24 + part(2)) * 60 + part(3)) * 60 + part(4);
  }
  if (parts == 1) return part(2) * 60;                 // MM
  if (parts == 2) return part(2) * 60 + part(3);       // MM:SS
  return (part(2) * 60 + part(3)) * 60 + part(4);      // HH:MM:SS
}

void check_slurm_fields(const Recipe& r, const Locator& where) {
  const ClusterSection& c = r.cluster;
  if (c.time_limit) {
    const std::optional<int64_t> limit = slurm_time_seconds(*c.time_limit);
    if (!limit || *limit <= 0)
      fail_at(where.at("cluster.time_limit"),
              "cluster.time_limit '" + printable(*c.time_limit) +
                  "' is not a Slurm time: use MM, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS");
    if (c.requeue && *limit <= c.signal_seconds + 60)
      fail_at(where.at("cluster.signal_seconds"),
              fmt::format("cluster.signal_seconds ({}) leaves no training time in "
                          "cluster.time_limit {} ({} s): the stop signal would come at once; "
                          "lower signal_seconds or raise time_limit",
                          c.signal_seconds, *c.time_limit, *limit));
  }
  check_name(where, "cluster.partition", c.partition);
  check_name(where, "cluster.account", c.account);
  check_name(where, "cluster.job_name", c.job_name);
  check_name(where, "cluster.qos", c.qos);
  check_name(where, "cluster.constraint", c.constraint);
  check_name(where, "cluster.mail_user", c.mail_user);
  check_mail_type(where, c.mail_type);
  check_options(where, "cluster.sbatch", c.sbatch);
  check_options(where, "cluster.srun", c.srun);
  for (const std::string& line : c.setup) {
    for (const char ch : line) {
      if (ch != '\n' && ch != '\t' && std::iscntrl(static_cast<unsigned char>(ch)))
        fail_at(where.at("cluster.setup"),
                "cluster.setup line '" + printable(line) + "' holds a control character");
    }
  }
}

}  // namespace megatron::recipe
