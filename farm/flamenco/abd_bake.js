// SPDX-License-Identifier: GPL-3.0-or-later
//
// Flamenco 3 job type "ABD Joints Bake": bake the ABD Joints rigs of .blend files, one task per
// file. Each task runs the batch bake of its file in a new process on a Worker (Flamenco's
// `exec` command, parameters `exe` and `args`: `PYTHON -P ABD_JOINTS/abd_addon/batch.py FILE
// --out-dir OUT_DIR --device DEVICE`), which exits non-zero with a one-line reason when the file fails, so Flamenco marks
// that task failed (and retries it as configured) while the other files are baked.
//
// Install: copy this file into the `scripts` folder next to the flamenco-manager executable and
// restart the Manager. Define two Manager variables (per platform) for the Workers: `abd_python`,
// a Python with the bpy module and the requirements of abd-joints, and `abd_joints`, the
// abd-joints checkout. README.md, "Baking on a farm", says how to prepare and warm the Workers.

const JOB_TYPE = {
    label: "ABD Joints Bake",
    description: "Bake the ABD Joints rigs of .blend files, one task per file",
    settings: [
        {
            key: "blendfiles", type: "string", required: true,
            description: "The .blend files to bake, as the Workers see them, separated by ';' or line breaks, each exactly as written (a space before or after ';' is part of a name)",
        },
        {
            key: "out_dir", type: "string", subtype: "dir_path", required: true,
            description: "Each baked file is saved as OUT_DIR/<its file name> (made if missing)",
        },
        {
            key: "device", type: "string", choices: ["cpu", "cupy", "libuipc"], default: "cpu",
            description: "Where the solver solves (cupy: an NVIDIA GPU through CuPy on the Worker; libuipc: the scene run by libuipc on the Worker's NVIDIA GPU, pyuipc installed)",
        },
        {
            key: "python", type: "string", default: "{abd_python}", visible: false,
            description: "The Workers' Python with the bpy module",
        },
        {
            key: "abd_joints", type: "string", default: "{abd_joints}", visible: false,
            description: "The abd-joints checkout on the Workers",
        },
    ],
};

function compileJob(job) {
    const settings = job.settings;
    // Names are taken exactly: a file name may end (or start) with spaces, and trimming them would
    // bake another file. Only a line's carriage return goes, and entries of nothing but spaces.
    const files = settings.blendfiles.split(/;|\r?\n/).filter((file) => file.trim().length > 0);
    if (files.length == 0) {
        throw "ABD Joints Bake: no .blend file in 'blendfiles'";
    }
    // Two inputs with one file name would be saved to the same OUT_DIR/<file name>.
    const names = new Set();
    for (const file of files) {
        const name = baseName(file);
        if (names.has(name)) {
            throw `ABD Joints Bake: two .blend files are named ${name}: their bakes would be saved to one file`;
        }
        names.add(name);
    }
    const batch = settings.abd_joints + "/abd_addon/batch.py";
    for (const file of files) {
        const task = author.Task(`bake-${baseName(file)}`, "blender");
        task.addCommand(author.Command("exec", {
            exe: settings.python,
            // -P: the script's own folder (abd_addon) is not put first on sys.path.
            args: ["-P", batch, file, "--out-dir", settings.out_dir, "--device", settings.device],
        }));
        job.addTask(task);
    }
}

// The last part of a path, with '/' or '\' between folders.
function baseName(file) {
    return file.split(/[\\/]/).pop();
}
