#include "vmm/testrun/shell_words.h"

#include <cctype>

namespace minivmm::testrun {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_glob_char(char c) { return c == '*' || c == '?' || c == '['; }

// One word being built: its text, and the same text with every quoted character escaped, as
// the pattern glob(3) should see.
struct Word {
  std::string text;
  std::string pattern;
  bool exists = false;  // '' and "" make an (empty) word
  bool globbable = false;

  void literal(char c) {
    text += c;
    if (is_glob_char(c) || c == '\\') pattern += '\\';
    pattern += c;
    exists = true;
  }
  void unquoted(char c) {
    text += c;
    pattern += c;
    globbable = globbable || is_glob_char(c);
    exists = true;
  }
};

class Splitter {
 public:
  Splitter(std::string_view in, const ShellContext& ctx) : in_(in), ctx_(ctx) {}

  std::optional<std::vector<std::string>> run(std::string& error) {
    while (pos_ < in_.size()) {
      const char c = in_[pos_];
      if (is_blank(c)) {
        finish();
        ++pos_;
      } else if (c == '#' && !word_.exists) {
        break;  // a comment: the rest of the text
      } else if (c == '\\') {
        if (pos_ + 1 < in_.size() && in_[pos_ + 1] != '\n') word_.literal(in_[pos_ + 1]);
        pos_ += 2;
      } else if (c == '\'') {
        const auto end = in_.find('\'', pos_ + 1);
        if (end == std::string_view::npos) return fail(error, "unterminated single quote");
        for (std::size_t i = pos_ + 1; i < end; ++i) word_.literal(in_[i]);
        word_.exists = true;
        pos_ = end + 1;
      } else if (c == '"') {
        if (!double_quoted(error)) return std::nullopt;
      } else if (c == '$' && pos_ + 1 < in_.size() && in_[pos_ + 1] == '\'') {
        if (!ansi_c_quoted(error)) return std::nullopt;
      } else if (c == '$' || c == '`') {
        std::optional<std::string> value = expansion(error);
        if (!value) return std::nullopt;
        split_into_words(*value);
      } else {
        word_.unquoted(c);
        ++pos_;
      }
    }
    finish();
    return std::move(words_);
  }

 private:
  std::optional<std::vector<std::string>> fail(std::string& error, const char* why) {
    error = why;
    return std::nullopt;
  }

  void finish() {
    if (!word_.exists) return;
    if (word_.globbable && ctx_.glob) {
      std::vector<std::string> matches = ctx_.glob(word_.pattern);
      if (!matches.empty()) {
        for (auto& m : matches) words_.push_back(std::move(m));
        word_ = Word{};
        return;
      }
    }
    words_.push_back(std::move(word_.text));
    word_ = Word{};
  }

  // An unquoted expansion's value is split on blanks; its pieces join the words around it.
  void split_into_words(std::string_view value) {
    for (char c : value) {
      if (is_blank(c)) {
        finish();
      } else {
        word_.unquoted(c);
      }
    }
  }

  bool double_quoted(std::string& error) {
    ++pos_;
    word_.exists = true;
    while (pos_ < in_.size() && in_[pos_] != '"') {
      const char c = in_[pos_];
      if (c == '\\' && pos_ + 1 < in_.size() &&
          std::string_view("$`\"\\\n").find(in_[pos_ + 1]) != std::string_view::npos) {
        if (in_[pos_ + 1] != '\n') word_.literal(in_[pos_ + 1]);
        pos_ += 2;
      } else if (c == '$' || c == '`') {
        std::optional<std::string> value = expansion(error);
        if (!value) return false;
        for (char v : *value) word_.literal(v);
      } else {
        word_.literal(c);
        ++pos_;
      }
    }
    if (pos_ >= in_.size()) {
      error = "unterminated double quote";
      return false;
    }
    ++pos_;
    return true;
  }

  bool ansi_c_quoted(std::string& error) {
    pos_ += 2;
    word_.exists = true;
    while (pos_ < in_.size() && in_[pos_] != '\'') {
      char c = in_[pos_++];
      if (c == '\\' && pos_ < in_.size()) {
        const char e = in_[pos_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
      }
      word_.literal(c);
    }
    if (pos_ >= in_.size()) {
      error = "unterminated $'...' quote";
      return false;
    }
    ++pos_;
    return true;
  }

  // At a '$' or '`': the expansion's value (nullopt on a syntax error). A '$' that starts no
  // expansion is itself.
  std::optional<std::string> expansion(std::string& error) {
    if (in_[pos_] == '`') {
      const auto end = in_.find('`', pos_ + 1);
      if (end == std::string_view::npos) {
        error = "unterminated backquote";
        return std::nullopt;
      }
      const std::string_view command = in_.substr(pos_ + 1, end - pos_ - 1);
      pos_ = end + 1;
      return substitute(command);
    }
    const std::size_t start = pos_ + 1;
    if (start < in_.size() && in_[start] == '(') {
      int depth = 1;
      std::size_t i = start + 1;
      for (; i < in_.size() && depth > 0; ++i) {
        if (in_[i] == '(') ++depth;
        if (in_[i] == ')') --depth;
      }
      if (depth != 0) {
        error = "unterminated $(...)";
        return std::nullopt;
      }
      const std::string_view command = in_.substr(start + 1, i - start - 2);
      pos_ = i;
      return substitute(command);
    }
    if (start < in_.size() && in_[start] == '{') {
      const auto end = in_.find('}', start);
      if (end == std::string_view::npos) {
        error = "unterminated ${...}";
        return std::nullopt;
      }
      pos_ = end + 1;
      return lookup(in_.substr(start + 1, end - start - 1));
    }
    if (start < in_.size() && is_name_start(in_[start])) {
      std::size_t end = start;
      while (end < in_.size() && is_name_char(in_[end])) ++end;
      pos_ = end;
      return lookup(in_.substr(start, end - start));
    }
    if (start < in_.size() && std::isdigit(static_cast<unsigned char>(in_[start]))) {
      pos_ = start + 1;  // a positional parameter: the suite's eval has none
      return std::string();
    }
    pos_ = start;
    return std::string("$");
  }

  std::string lookup(std::string_view name) {
    if (!ctx_.variable) return "";
    return ctx_.variable(name).value_or("");
  }

  std::string substitute(std::string_view command) {
    std::string out = ctx_.command_output ? ctx_.command_output(command) : std::string();
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::string_view in_;
  const ShellContext& ctx_;
  std::size_t pos_ = 0;
  Word word_;
  std::vector<std::string> words_;
};

}  // namespace

std::optional<std::vector<std::string>> shell_words(std::string_view text,
                                                    const ShellContext& ctx, std::string& error) {
  return Splitter(text, ctx).run(error);
}

}  // namespace minivmm::testrun
