// The optional words of a driver status (dstatus::detail), in a form that costs nothing until
// a failure sets them.
#pragma once

#include <cstddef>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace memarea::detail {

/// dstatus's extra words. Nothing at all until a failure sets them: a successful status is
/// made with one store and dropped with one test, where a std::string costs three stores and,
/// wherever the compiler does not inline its destructor, a call (every driver call returns a
/// status, and a copy's fixed cost counts each). Read as a std::string would be.
class status_text {
 public:
  status_text() noexcept = default;
  status_text(const char* s) { assign(s ? std::string_view(s) : std::string_view()); }
  status_text(const std::string& s) { assign(s); }
  status_text(std::string&& s) { assign(std::move(s)); }
  status_text(const status_text& o) { assign(o.view()); }
  status_text(status_text&&) noexcept = default;
  status_text& operator=(const status_text& o) {
    if (this != &o) assign(o.view());
    return *this;
  }
  status_text& operator=(status_text&&) noexcept = default;
  status_text& operator=(const char* s) {
    assign(s ? std::string_view(s) : std::string_view());
    return *this;
  }
  status_text& operator=(const std::string& s) {
    assign(s);
    return *this;
  }
  status_text& operator=(std::string&& s) {
    assign(std::move(s));
    return *this;
  }

  bool empty() const noexcept { return !text_; }
  std::string_view view() const noexcept {
    return text_ ? std::string_view(*text_) : std::string_view();
  }
  operator std::string_view() const noexcept { return view(); }
  std::string str() const { return text_ ? *text_ : std::string(); }
  const char* c_str() const noexcept { return text_ ? text_->c_str() : ""; }
  std::size_t find(std::string_view what, std::size_t pos = 0) const noexcept {
    return view().find(what, pos);
  }
  friend bool operator==(const status_text& a, std::string_view b) noexcept {
    return a.view() == b;
  }
  friend std::ostream& operator<<(std::ostream& os, const status_text& t) {
    return os << t.view();
  }

 private:
  void assign(std::string_view s) {
    if (s.empty()) text_.reset();
    else text_ = std::make_unique<std::string>(s);
  }
  void assign(std::string&& s) {
    if (s.empty()) text_.reset();
    else text_ = std::make_unique<std::string>(std::move(s));
  }
  std::unique_ptr<std::string> text_;  ///< null: no words (never an empty string)
};

}  // namespace memarea::detail
