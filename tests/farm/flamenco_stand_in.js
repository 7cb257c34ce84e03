// A stand-in for the Flamenco Manager's job compiler, for the farm tests (Node 18 or later):
//
//     node tests/farm/flamenco_stand_in.js farm/flamenco/abd_bake.js '{"blendfiles": "...", ...}'
//
// It runs the job type script in a fresh context holding only what the script uses of Flamenco's
// documented compiler API (`author.Task(name, type)`, `author.Command(name, parameters)`,
// `task.addCommand`, `job.addTask`, `job.settings`, `print`), fills the job's settings with the
// JOB_TYPE defaults the given ones leave out, calls compileJob(job) and prints one JSON line:
// {"job_type": JOB_TYPE, "tasks": [{"name", "type", "commands": [{"name", "parameters"}]}]}.
// A compileJob that throws prints {"error": message} and exits with status 1.
//
// What it does not prove: that Flamenco's own JavaScript engine (goja) and Manager accept the
// script (a stand-in is not the Manager: other globals, variable expansion of "{abd_python}",
// settings checks), nor that a Worker runs the command. The `exec` command's parameters are not
// checked here either: they follow the Flamenco Worker's source, which reads `exe` (a string)
// and `args` (a list of strings) for `exec` (internal/worker/command_exec.go).
"use strict";
const fs = require("fs");
const vm = require("vm");

const [scriptPath, settingsJson] = process.argv.slice(2);
const tasks = [];
const author = {
    Task: (name, type) => {
        const task = { name, type, commands: [] };
        task.addCommand = (command) => task.commands.push(command);
        return task;
    },
    Command: (name, parameters) => ({ name, parameters }),
};
const context = vm.createContext({ author, print: (...args) => console.error(...args) });
vm.runInContext(fs.readFileSync(scriptPath, "utf8") + "\n;globalThis.JOB_TYPE = JOB_TYPE;", context,
                { filename: scriptPath });
const settings = JSON.parse(settingsJson);
for (const setting of context.JOB_TYPE.settings) {
    if (!(setting.key in settings) && "default" in setting) {
        settings[setting.key] = setting.default;
    }
}
const job = { settings, addTask: (task) => tasks.push(task) };
try {
    context.compileJob(job);
} catch (error) {
    console.log(JSON.stringify({ error: String(error) }));
    process.exit(1);
}
const plain = tasks.map(({ name, type, commands }) => ({ name, type, commands }));
console.log(JSON.stringify({ job_type: context.JOB_TYPE, tasks: plain }));
