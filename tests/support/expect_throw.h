#pragma once
// expectThrowWith<E>(f, {"part", ...}): `f` must throw E, and E's message must contain every
// part; another exception type, or none, is a test failure naming what happened.

#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>

namespace ringlet::testing {

template <typename E, typename F>
void expectThrowWith(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace ringlet::testing
