#include "ptwm/remote/s3_config.hpp"

#include <cstdlib>
#include <fstream>
#include <map>

#include "ptwm/remote/remote_url.hpp"

namespace ptwm::remote {
namespace {

using IniSection = std::map<std::string, std::string>;

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The keys of one [section] of an AWS ini file; nested blocks ("s3 =" then
// indented "addressing_style = path") are flattened to "s3.addressing_style".
IniSection read_ini_section(const std::string& path, const std::string& section) {
    IniSection out;
    std::ifstream in(path);
    std::string line, current, nested;
    while (std::getline(in, line)) {
        const std::string t = trim(line);
        if (t.empty() || t[0] == '#' || t[0] == ';') continue;
        if (t.front() == '[' && t.back() == ']') {
            current = trim(t.substr(1, t.size() - 2));
            nested.clear();
            continue;
        }
        if (current != section) continue;
        const auto eq = t.find('=');
        if (eq == std::string::npos) continue;
        const std::string key = trim(t.substr(0, eq)), value = trim(t.substr(eq + 1));
        const bool indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
        if (!indented) nested = value.empty() ? key : "";
        out[indented && !nested.empty() ? nested + "." + key : key] = value;
    }
    return out;
}

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string aws_file(const char* variable, const char* leaf) {
    if (const std::string v = env(variable); !v.empty()) return v;
    const std::string home = env("HOME");
    return (home.empty() ? std::string(".") : home) + "/.aws/" + leaf;
}

}  // namespace

S3Config S3Config::load(const S3Overrides& o) {
    S3Config c;
    const std::string env_profile = env("AWS_PROFILE");
    c.profile = o.profile ? *o.profile : !env_profile.empty() ? env_profile : "default";
    const std::string credentials_file = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    const std::string config_file = aws_file("AWS_CONFIG_FILE", "config");
    const IniSection creds = read_ini_section(credentials_file, c.profile);
    IniSection conf = read_ini_section(config_file, c.profile == "default" ? "default" : "profile " + c.profile);

    auto pick = [](std::initializer_list<std::string> candidates) {
        for (const auto& v : candidates)
            if (!v.empty()) return v;
        return std::string();
    };
    c.region = pick({o.region.value_or(""), env("AWS_REGION"), env("AWS_DEFAULT_REGION"), conf["region"], "us-east-1"});
    c.endpoint = pick({o.endpoint.value_or(""), env("AWS_ENDPOINT_URL_S3"), env("AWS_ENDPOINT_URL"),
                       conf["s3.endpoint_url"], conf["endpoint_url"]});
    while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
    if (!c.endpoint.empty() && c.endpoint.find("://") == std::string::npos) c.endpoint = "https://" + c.endpoint;
    const std::string style = conf["s3.addressing_style"];
    c.path_style = style == "path" || (style != "virtual" && !c.endpoint.empty());

    const bool env_keys = !env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty();
    if (env_keys && !o.profile) {
        c.access_key = env("AWS_ACCESS_KEY_ID");
        c.secret_key = env("AWS_SECRET_ACCESS_KEY");
        c.session_token = env("AWS_SESSION_TOKEN");
        c.credentials_from = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY";
    } else {
        // Keys may sit in either file (config takes them too).
        for (const IniSection* s : std::initializer_list<const IniSection*>{&creds, &conf}) {
            const auto key = s->find("aws_access_key_id"), secret = s->find("aws_secret_access_key");
            if (key == s->end() || secret == s->end()) continue;
            c.access_key = key->second;
            c.secret_key = secret->second;
            if (const auto token = s->find("aws_session_token"); token != s->end()) c.session_token = token->second;
            c.credentials_from = "profile '" + c.profile + "' in " + (s == &creds ? credentials_file : config_file);
            break;
        }
        if (c.access_key.empty())
            c.credentials_from = o.profile ? "none (profile '" + c.profile + "' has no keys in " + credentials_file + ")"
                                           : "none (unsigned requests)";
    }
    return c;
}

std::string S3Config::object_url(const std::string& bucket, const std::string& key) const {
    const std::string k = escape_key(key);
    if (path_style) {
        const std::string base = endpoint.empty() ? "https://s3." + region + ".amazonaws.com" : endpoint;
        return base + "/" + bucket + "/" + k;
    }
    if (endpoint.empty()) return "https://" + bucket + ".s3." + region + ".amazonaws.com/" + k;
    const auto scheme_end = endpoint.find("://") + 3;
    return endpoint.substr(0, scheme_end) + bucket + "." + endpoint.substr(scheme_end) + "/" + k;
}

}  // namespace ptwm::remote
