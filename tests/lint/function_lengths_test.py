"""tools/function_lengths.py on hand-made C++: which braces are function bodies, and their lengths.

    python3 tests/lint/function_lengths_test.py PROJECT_ROOT
"""
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

ROOT = Path(sys.argv.pop(1) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
sys.path.insert(0, str(ROOT / "tools"))
import function_lengths  # noqa: E402

SOURCE = textwrap.dedent('''\
    #include <string>
    #define TWICE(x) { (x); (x); }
    namespace outer {
    namespace {
    const char* kText = R"md(a { brace } in a raw string)md";
    const int kTable[] = {1, 2, 3};
    }  // namespace

    struct Holder : public Base {
      Holder(int a) : value_{a}, name_("}") {
        // a } in a comment
      }
      int value() const { return value_; }
      int value_;
      std::string name_;
    };

    int Holder::sum(int a,
                    int b) {
      auto add = [](int x, int y) {
        return x + y;
      };
      if (a > b) {
        return add(a, b);
      }
      return '{' + 0;
    }
    }  // namespace outer
''')


def functions(text):
    return [(name, last - first + 1) for name, first, last in
            function_lengths.functions_in(function_lengths.blank_literals_and_comments(text))]


class FunctionLengthsTest(unittest.TestCase):
    def test_finds_function_bodies_only(self):
        self.assertEqual(functions(SOURCE), [("Holder", 3), ("value", 1), ("sum", 10)])

    def test_lists_functions_over_the_limit_and_fails(self):
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "code.cpp").write_text(SOURCE)
            run = subprocess.run([sys.executable, str(ROOT / "tools" / "function_lengths.py"), "--max", "9", folder],
                                 capture_output=True, text=True)
            self.assertEqual(run.returncode, 1)
            self.assertEqual(run.stdout.strip(), f"{folder}/code.cpp:18: sum: 10 lines (more than 9)")
            run = subprocess.run([sys.executable, str(ROOT / "tools" / "function_lengths.py"), "--max", "10", folder],
                                 capture_output=True, text=True)
            self.assertEqual((run.returncode, run.stdout), (0, ""))

    def test_excluded_folders_are_not_read(self):
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "moving").mkdir()
            (Path(folder) / "moving" / "code.cpp").write_text(SOURCE)
            run = subprocess.run([sys.executable, str(ROOT / "tools" / "function_lengths.py"), "--max", "2", folder,
                                  "--exclude", f"{folder}/moving"], capture_output=True, text=True)
            self.assertEqual((run.returncode, run.stdout), (0, ""))


if __name__ == "__main__":
    unittest.main()
