from memlab.site.build import main

main()
