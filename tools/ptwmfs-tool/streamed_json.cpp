#include "streamed_json.hpp"

namespace ptwm::tool {
namespace {

constexpr int kIndent = 2;

void put(std::FILE* out, const std::string& text) { std::fwrite(text.data(), 1, text.size(), out); }

// `value` as dump(2) prints it `depth` levels down: dump() indents as if at
// the top, so every line after the first moves right by depth levels.
// (A string's newline is escaped in JSON text: every '\n' is a line's end.)
void put_value(std::FILE* out, const nlohmann::json& value, int depth) {
    const std::string text = value.dump(kIndent, ' ', false, nlohmann::json::error_handler_t::replace);
    const std::string pad(static_cast<size_t>(depth * kIndent), ' ');
    size_t line = 0;
    for (size_t end; (end = text.find('\n', line)) != std::string::npos; line = end + 1) {
        std::fwrite(text.data() + line, 1, end + 1 - line, out);
        put(out, pad);
    }
    std::fwrite(text.data() + line, 1, text.size() - line, out);
}

}  // namespace

void print_json(std::FILE* out, const nlohmann::json& doc, const std::map<std::string, StreamedArray>& arrays) {
    const std::string member_pad(kIndent, ' '), element_pad(2 * kIndent, ' ');
    put(out, "{");
    bool first = true;
    for (const auto& [key, value] : doc.items()) {  // in sorted order, as dump() prints them
        put(out, first ? "\n" : ",\n");
        first = false;
        put(out, member_pad);
        put_value(out, nlohmann::json(key), 0);
        put(out, ": ");
        const auto streamed = arrays.find(key);
        if (streamed == arrays.end()) {
            put_value(out, value, 1);
            continue;
        }
        const StreamedArray& array = streamed->second;
        if (array.size == 0) {
            put(out, "[]");
            continue;
        }
        put(out, "[\n");
        for (size_t i = 0; i < array.size; ++i) {
            if (i > 0) put(out, ",\n");
            put(out, element_pad);
            put_value(out, array.element(i), 2);
        }
        put(out, "\n" + member_pad + "]");
    }
    put(out, first ? "}\n" : "\n}\n");
}

}  // namespace ptwm::tool
