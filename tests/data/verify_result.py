"""What tests of `ptwmfs-tool verify --against` assert, local or remote."""
import subprocess


def assert_one_failure(test, tool, packed, original, message, env=None):
    """`verify PACKED --against ORIGINAL` exits 1 with exactly one FAILED
    line, and that line says `message`."""
    p = subprocess.run([str(tool), "verify", str(packed), "--against", str(original)], capture_output=True,
                       text=True, env=env)
    test.assertEqual(p.returncode, 1, p.stdout + p.stderr)
    test.assertIn("FAILED " + message, p.stdout)
    test.assertEqual(p.stdout.count("FAILED"), 1, p.stdout)
