# fish completion for cutout
#
# Install: copy this file to ~/.config/fish/completions/cutout.fish, or run:
#   cutout completion fish | source

set -l __cutout_commands remove serve model-server keys credits account usage models openapi health completion help

# Prints the command being completed: nothing before one is typed, `remove` when the first word
# is an input (`cutout photo.jpg` means `cutout remove photo.jpg`). Values of options are skipped.
function __cutout_command
    set -l words (commandline -opc)
    set -e words[1]
    set -l skip 0
    for word in $words
        if test $skip -eq 1
            set skip 0
            continue
        end
        if contains -- $word $__cutout_image_value_opts $__cutout_value_opts
            set skip 1
            continue
        end
        switch $word
            case '-*'
            case remove serve model-server keys credits account usage models openapi health completion help
                echo $word
                return
            case '*'
                echo remove
                return
        end
    end
end

# True when the command being completed is one of the arguments
function __cutout_is
    set -l cmd (__cutout_command)
    contains -- "$cmd" $argv
end

function __cutout_no_command
    set -l cmd (__cutout_command)
    test -z "$cmd"
end

function __cutout_removing
    set -l cmd (__cutout_command)
    test -z "$cmd"; or test "$cmd" = remove
end

complete -c cutout -e

# On every command; each command's own flags are in the generated block below
complete -c cutout -s h -l help -d 'Show help'
complete -c cutout -n __cutout_no_command -s V -l version -d 'Show the version'

# Commands
complete -c cutout -n __cutout_no_command -a remove -d 'Remove backgrounds locally (default)'
complete -c cutout -n __cutout_no_command -a serve -d 'Run the v1 HTTP API'
complete -c cutout -n __cutout_no_command -a model-server -d 'Serve the model over the Open Inference Protocol v2'
complete -c cutout -n __cutout_no_command -a keys -d 'Create, list and revoke API keys'
complete -c cutout -n __cutout_no_command -a credits -d 'Add purchased credits'
complete -c cutout -n __cutout_no_command -a account -d 'Credit balance and plan'
complete -c cutout -n __cutout_no_command -a usage -d 'Credits used per day'
complete -c cutout -n __cutout_no_command -a models -d 'List, verify and pull models'
complete -c cutout -n __cutout_no_command -a openapi -d 'Print the OpenAPI 3.1.0 document'
complete -c cutout -n __cutout_no_command -a health -d "Ask a running server's /readyz (exit 0 when ready)"
complete -c cutout -n __cutout_no_command -a completion -d 'Print a shell completion script'
complete -c cutout -n __cutout_no_command -a help -d 'Show help for a command'

# remove (also without the word `remove`): inputs are files, so file completion stays on
# >>> image flags: written from the options table (src/options.ts) by `npm run completions`; do not edit
# The image flags that take a value, skipped by __cutout_command
set -g __cutout_image_value_opts --size --format --bg-color --quality --precision --alpha --crop-margin --roi --scale --position --bg-image --keep-alpha --canvas --max-width --max-height --padding --margin --align --scaling --snap-cropped --outline-width --outline-color --outline-blur --shadow --shadow-opacity --shadow-softness --shadow-direction --shadow-elevation --shadow-color --bg-blur --bg-blur-mode --dpi --animation
complete -c cutout -n __cutout_removing -l size -x -a 'preview full auto' -d 'Output size'
complete -c cutout -n __cutout_removing -l format -x -a 'png webp jpg gif auto zip' -d 'Output encoding'
complete -c cutout -n __cutout_removing -l bg-color -x -a 'transparent' -d 'Background: transparent, a hex colour or a CSS name'
complete -c cutout -n __cutout_removing -l crop -d 'Crop to the subject\'s bounding box'
complete -c cutout -n __cutout_removing -l quality -x -a 'fast balanced best max' -d 'Speed against quality'
complete -c cutout -n __cutout_removing -l precision -x -a 'auto fp32 int8' -d 'Model number format (int8 on VNNI CPUs)'
complete -c cutout -n __cutout_removing -l mask -d 'Write the alpha matte alone'
complete -c cutout -n __cutout_removing -l alpha -x -a 'soft hard' -d 'Soft matte, or hard (thresholded) for stickers and icons'
complete -c cutout -n __cutout_removing -l no-refine -d 'Plain bilinear matte, no guided refinement'
complete -c cutout -n __cutout_removing -l no-decontaminate -d 'Keep the original colours at soft edges'
complete -c cutout -n __cutout_removing -l crop-margin -x -d 'Margin around the crop, px or %'
complete -c cutout -n __cutout_removing -l roi -x -d 'Only this rectangle may hold the subject: x1 y1 x2 y2'
complete -c cutout -n __cutout_removing -l scale -x -a 'original' -d 'Share of the canvas the subject fills'
complete -c cutout -n __cutout_removing -l position -x -a 'original center' -d 'Where the subject goes'
complete -c cutout -n __cutout_removing -l bg-image -r -F -d 'Background picture: a file or URL'
complete -c cutout -n __cutout_removing -l keep-alpha -x -a 'never auto' -d 'Keep an input\'s own transparency'
complete -c cutout -n __cutout_removing -l canvas -x -a '1000x1000 original subject' -d 'Output canvas: WxH, original or subject'
complete -c cutout -n __cutout_removing -l max-width -x -d 'Largest width of an original or subject canvas'
complete -c cutout -n __cutout_removing -l max-height -x -d 'Largest height of an original or subject canvas'
complete -c cutout -n __cutout_removing -l padding -x -a '10% 0.1 40px' -d 'Space around the subject: 1-4 of NNpx, NN% or 0-0.49'
complete -c cutout -n __cutout_removing -l margin -x -a '5% 20px' -d 'Space inside the canvas edge, never ignored'
complete -c cutout -n __cutout_removing -l align -x -a 'center top bottom left right' -d 'Where the subject goes on the canvas'
complete -c cutout -n __cutout_removing -l scaling -x -a 'fit fill' -d 'Fit the subject inside, or fill the room'
complete -c cutout -n __cutout_removing -l snap-cropped -x -a 'true false' -d 'Cropped sides snap to the canvas edge'
complete -c cutout -n __cutout_removing -l outline-width -x -a '8px 0.01' -d 'Outline around the subject: NNpx or 0-0.1'
complete -c cutout -n __cutout_removing -l outline-color -x -d 'Outline colour'
complete -c cutout -n __cutout_removing -l outline-blur -x -d 'Outline blur (glow): 0-0.025'
complete -c cutout -n __cutout_removing -l shadow -x -a 'none drop float cast' -d 'Shadow under the subject'
complete -c cutout -n __cutout_removing -l shadow-opacity -x -d 'Shadow opacity 0-1'
complete -c cutout -n __cutout_removing -l shadow-softness -x -d 'Shadow softness 0-1'
complete -c cutout -n __cutout_removing -l shadow-direction -x -d 'Light direction in degrees (0: shadow below)'
complete -c cutout -n __cutout_removing -l shadow-elevation -x -d 'Cast shadow light elevation 5-85 degrees'
complete -c cutout -n __cutout_removing -l shadow-color -x -d 'Shadow colour'
complete -c cutout -n __cutout_removing -l bg-blur -x -a 'true 0.01 0.03' -d 'Blur the photo\'s own background: true or 0-0.05'
complete -c cutout -n __cutout_removing -l bg-blur-mode -x -a 'gaussian bokeh' -d 'Background blur kind'
complete -c cutout -n __cutout_removing -l dpi -x -a '72 300' -d 'Pixel density 72-1200'
complete -c cutout -n __cutout_removing -l keep-metadata -d 'Keep the input\'s EXIF, XMP and colour profile'
complete -c cutout -n __cutout_removing -l animation -x -a 'keep first' -d 'Animated input: every frame or the first'
# <<< image flags

# >>> command flags: written from the settings table and the commands (src/settings.ts, src/commands/) by `npm run completions`; do not edit
# The flags that take a value, skipped by __cutout_command
set -g __cutout_value_opts -o --out -c --concurrency --model --review-below --key --inference-workers --inference-threads --data --config --store --manifest --exclude --triton --precision --host --port --base-url --workers --queue-limit --sync-timeout --rate-limit --result-ttl --callback-backoff --metrics-port --metrics-host --log-level --admin-token --results --lease-ms --upstream --upstream-model --upstream-token --token --name --account --expires-at --label --reason --url
complete -c cutout -n __cutout_removing -s o -l out -r -F -d 'Output directory, or a file when there is one input'
complete -c cutout -n __cutout_removing -s c -l concurrency -x -d 'Images processed at once'
complete -c cutout -n __cutout_removing -l model -r -F -d 'A model from `cutout models list`, or an .onnx file with its manifest'
complete -c cutout -n __cutout_removing -s r -l recursive -d 'Descend into sub-directories of directory inputs'
complete -c cutout -n __cutout_removing -l include-outputs -d 'Take named files that look like cutout\'s outputs'
complete -c cutout -n __cutout_removing -l skip-existing -d 'Skip inputs whose output exists'
complete -c cutout -n __cutout_removing -l overwrite -d 'Replace existing outputs'
complete -c cutout -n __cutout_removing -l json -d 'One JSON object per input on stdout (with each cutout\'s confidence)'
complete -c cutout -n __cutout_removing -l review-below -x -d 'Flag each cutout whose confidence'
complete -c cutout -n __cutout_removing -l key -x -d 'Charge that key\'s credits by the same rules as the server'
complete -c cutout -n __cutout_removing -l inference-workers -x -d 'Inference worker threads, each with its own session'
complete -c cutout -n __cutout_removing -l inference-threads -x -d 'Intra-op threads of each session'
complete -c cutout -n __cutout_removing -s q -l quiet -d 'No progress output'
complete -c cutout -n __cutout_removing -l no-progress -d 'No spinner or progress lines'
complete -c cutout -n __cutout_removing -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n __cutout_removing -l config -r -F -d 'Config file'
complete -c cutout -n __cutout_removing -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n __cutout_removing -l manifest -r -F -d 'A JSON-lines record of each input handled'
complete -c cutout -n __cutout_removing -l force -d 'With --manifest: redo every input'
complete -c cutout -n __cutout_removing -l watch -d 'After the inputs, keep watching the input folders and process each new or changed image once completely written, until Ctrl-C'
complete -c cutout -n __cutout_removing -l exclude -x -d 'Leave out matching inputs (repeatable)'
complete -c cutout -n __cutout_removing -l dry-run -d 'Print what would be processed and what skipped, with counts'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from list' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from list' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from list' -l json -d 'JSON output'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from verify' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from verify' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from verify' -l json -d 'JSON output'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from pull' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from pull' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from pull' -l no-variants -d 'Skip the smaller-input copies for --quality fast and balanced and the int8 copy'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from export' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from export' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from export' -l triton -x -a '(__fish_complete_directories)' -d 'The model repository to write'
complete -c cutout -n '__cutout_is models; and __fish_seen_subcommand_from export' -l no-variants -d 'Skip the smaller-input models for --quality fast and balanced'
complete -c cutout -n '__cutout_is serve' -l data -x -a '(__fish_complete_directories)' -d 'Data directory: the SQLite database, results, generated secrets'
complete -c cutout -n '__cutout_is serve' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is serve' -l model -r -F -d 'The model'
complete -c cutout -n '__cutout_is serve' -l inference-workers -x -d 'Inference worker threads, each with its own session'
complete -c cutout -n '__cutout_is serve' -l inference-threads -x -d 'Intra-op threads of each session'
complete -c cutout -n '__cutout_is serve' -l precision -x -a 'auto fp32 int8' -d 'Auto | fp32 | int8: the default precision'
complete -c cutout -n '__cutout_is serve' -l preload -d 'Load the model before "listening" is printed'
complete -c cutout -n '__cutout_is serve' -l host -x -a '(__fish_print_hostnames)' -d 'Bind address'
complete -c cutout -n '__cutout_is serve' -l port -x -d 'Port'
complete -c cutout -n '__cutout_is serve' -l base-url -x -d 'The {base_url} of result URLs'
complete -c cutout -n '__cutout_is serve' -l workers -x -d 'Inference jobs run at once'
complete -c cutout -n '__cutout_is serve' -l queue-limit -x -d 'Jobs waiting before /jobs answers 503 gpu_unavailable'
complete -c cutout -n '__cutout_is serve' -l sync-timeout -x -d 'Hard timeout of POST /api/v1/remove'
complete -c cutout -n '__cutout_is serve' -l rate-limit -x -d 'Requests per minute per key'
complete -c cutout -n '__cutout_is serve' -l result-ttl -x -d 'How long results can be downloaded'
complete -c cutout -n '__cutout_is serve' -l callback-backoff -x -d 'First callback retry delay, doubling each retry'
complete -c cutout -n '__cutout_is serve' -l allow-private-network -d 'Let image_url and callback URLs reach loopback and private addresses'
complete -c cutout -n '__cutout_is serve' -l no-playground -d 'Do not serve the web playground page at /'
complete -c cutout -n '__cutout_is serve' -l no-removebg -d 'Do not answer remove.bg\'s API'
complete -c cutout -n '__cutout_is serve' -l no-photoroom -d 'Do not answer Photoroom\'s API'
complete -c cutout -n '__cutout_is serve' -l no-clipdrop -d 'Do not answer Clipdrop\'s API (POST /remove-background/v1)'
complete -c cutout -n '__cutout_is serve' -l no-metrics -d 'Do not serve Prometheus metrics at /metrics'
complete -c cutout -n '__cutout_is serve' -l metrics-port -x -d 'Serve /metrics on a listener of its own on this port, not on the API port'
complete -c cutout -n '__cutout_is serve' -l metrics-host -x -a '(__fish_print_hostnames)' -d 'Bind address of the --metrics-port listener'
complete -c cutout -n '__cutout_is serve' -l log-level -x -a 'trace debug info warn error fatal silent' -d 'Lowest level of the JSON request log on stdout: trace, debug, info, warn, error, fatal or silent'
complete -c cutout -n '__cutout_is serve' -l admin-token -x -d 'Turn on the admin API under /api/v1/admin/'
complete -c cutout -n '__cutout_is serve' -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n '__cutout_is serve' -l results -x -d 'Keep result images in an S3-compatible object store, s3://BUCKET[/PREFIX], configured by the AWS SDK\'s variables'
complete -c cutout -n '__cutout_is serve' -l results-path-style -d 'Path-style addressing for the object store of --results'
complete -c cutout -n '__cutout_is serve' -l results-redirect -d 'GET /api/v1/results/{id} answers 302 to a presigned URL of the object store'
complete -c cutout -n '__cutout_is serve' -l lease-ms -x -d 'How long a claimed job stays with its server without a renewal'
complete -c cutout -n '__cutout_is serve' -l upstream -x -d 'Run the model on an Open Inference Protocol v2 server'
complete -c cutout -n '__cutout_is serve' -l upstream-model -x -d 'The model\'s name on the upstream'
complete -c cutout -n '__cutout_is serve' -l upstream-token -x -d 'Sent to the upstream as "Authorization: Bearer TOKEN"'
complete -c cutout -n '__cutout_is serve' -l no-exit-with-parent -d 'Keep serving when the process that started serve exits'
complete -c cutout -n '__cutout_is model-server' -l data -x -a '(__fish_complete_directories)' -d 'Data directory: the SQLite database, results, generated secrets'
complete -c cutout -n '__cutout_is model-server' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is model-server' -l model -r -F -d 'The model'
complete -c cutout -n '__cutout_is model-server' -l inference-workers -x -d 'Inference worker threads, each with its own session'
complete -c cutout -n '__cutout_is model-server' -l inference-threads -x -d 'Intra-op threads of each session'
complete -c cutout -n '__cutout_is model-server' -l precision -x -a 'auto fp32 int8' -d 'Auto | fp32 | int8: the default precision'
complete -c cutout -n '__cutout_is model-server' -l host -x -a '(__fish_print_hostnames)' -d 'Bind address'
complete -c cutout -n '__cutout_is model-server' -l port -x -d 'Port'
complete -c cutout -n '__cutout_is model-server' -l token -x -d 'Require "Authorization: Bearer TOKEN" on every endpoint but /v2/health/*'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l name -x -d 'A label for the key'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l test -d 'A cut_test_ key: never charged, results capped to preview size'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l account -x -d 'Add the key to this account instead of opening a new one'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l expires-at -x -d 'Refuse the key from this time on'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l rate-limit -x -d 'The key\'s own requests per minute, in place of the server\'s --rate-limit'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l label -x -d 'A label of the key (repeat for more)'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l json -d 'Print {"id", "key", "account", "credits"}'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from create' -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from list' -l json -d 'One JSON object per key'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from list' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from list' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from list' -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from revoke' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from revoke' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is keys; and __fish_seen_subcommand_from revoke' -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n '__cutout_is credits; and __fish_seen_subcommand_from add' -l reason -x -d 'Why, kept with the ledger row and in the audit trail'
complete -c cutout -n '__cutout_is credits; and __fish_seen_subcommand_from add' -l json -d 'Print {"account", "balance"}'
complete -c cutout -n '__cutout_is credits; and __fish_seen_subcommand_from add' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is credits; and __fish_seen_subcommand_from add' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is credits; and __fish_seen_subcommand_from add' -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n '__cutout_is account' -l key -x -d 'The account of this key'
complete -c cutout -n '__cutout_is account' -l json -d 'The JSON of GET /api/v1/account'
complete -c cutout -n '__cutout_is account' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is account' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is account' -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n '__cutout_is usage' -l key -x -d 'The account of this key'
complete -c cutout -n '__cutout_is usage' -l json -d 'The JSON of GET /api/v1/usage'
complete -c cutout -n '__cutout_is usage' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is usage' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is usage' -l store -x -d 'Where state lives: postgres://USER[:PASS]@HOST[:PORT]/DB shared by a fleet'
complete -c cutout -n '__cutout_is openapi' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is openapi' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is health' -l url -x -d 'The server\'s base URL, or a probe URL with its path'
complete -c cutout -n '__cutout_is health' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is health' -l config -r -F -d 'Config file'
complete -c cutout -n '__cutout_is completion' -l data -x -a '(__fish_complete_directories)' -d 'Data directory'
complete -c cutout -n '__cutout_is completion' -l config -r -F -d 'Config file'
# <<< command flags

# serve
complete -c cutout -n '__cutout_is serve' -f

# model-server
complete -c cutout -n '__cutout_is model-server' -f

# keys create|list|revoke
set -l keys '__cutout_is keys'
complete -c cutout -n "$keys; and not __fish_seen_subcommand_from create list revoke" -f -a create -d 'Create a key'
complete -c cutout -n "$keys; and not __fish_seen_subcommand_from create list revoke" -f -a list -d 'List keys'
complete -c cutout -n "$keys; and not __fish_seen_subcommand_from create list revoke" -f -a revoke -d 'Revoke a key'
complete -c cutout -n $keys -f

# credits add
complete -c cutout -n '__cutout_is credits; and not __fish_seen_subcommand_from add' -f -a add -d 'Add purchased credits'
complete -c cutout -n '__cutout_is credits' -f

# account, usage
complete -c cutout -n '__cutout_is account usage' -f

# models list|verify|pull|export
set -l models '__cutout_is models'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a list -d 'Known models'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a verify -d 'Check presence and checksums'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a pull -d 'Assemble a model and build its quality variants'
complete -c cutout -n "$models; and not __fish_seen_subcommand_from list verify pull export" -f -a export -d 'Write a Triton model repository'
complete -c cutout -n $models -f

# openapi
complete -c cutout -n '__cutout_is openapi' -f

# health
complete -c cutout -n '__cutout_is health' -f

# completion bash|zsh|fish
set -l comp '__cutout_is completion'
complete -c cutout -n "$comp; and not __fish_seen_subcommand_from bash zsh fish" -f -a 'bash zsh fish' -d Shell
complete -c cutout -n $comp -f

# help <command>
complete -c cutout -n '__cutout_is help' -f -a "$__cutout_commands"
